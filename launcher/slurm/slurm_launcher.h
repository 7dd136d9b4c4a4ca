// `drun --launcher slurm ... train.py`, typed once in an sbatch script or an
// salloc shell: this process hosts the job's rendezvous (JobHost) on the batch
// node and starts one `drun agent` per node with
//
//   srun --nodes=N --ntasks=N --ntasks-per-node=1 --kill-on-bad-exit=1
//        --input=all --whole --mpi=none --job-name=drun-agents <drun> agent
//
// The job (JobSpec, token, rendezvous address) goes to every agent as the
// launch message on srun's standard input, which srun broadcasts to all tasks
// (--input=all), so no argument is ever re-quoted through a shell. That pipe
// then stays open as the agents' lifeline: when it closes with no signal's
// notice first (drun died) every agent stops its workers (SIGHUP) and exits.
//
// The agents' output passes through srun's own I/O, which holds a task's
// output until a newline (srun --unbuffered is no cure: Slurm 22.05 then
// runs the tasks on a pseudo-terminal, which echoes and turns '\n' into
// "\r\n"). So the launch tells the agents (AgentLaunch.console_relay) to
// write their console as relay frames, one line each with the host's name,
// a partial line (a prompt, a `\r` bar) as a frame of its own; srun's stdout
// and stderr come back to drun on pipes, and drun shows every host's bytes
// through its own console (srun_relay.h): partial lines at once, two hosts'
// bars on rows of their own when drun's stdout is a terminal, srun's own
// lines as they are.
//
// The agents dial this machine at --local-addr, else at the source address of
// its route toward another node's NodeAddr (scontrol), which works from an
// salloc shell on a login host whose resolver knows no node names; when no
// node's address routes from here, drun says so in one line naming
// --local-addr and starts nothing.
//
// The end: the job's Finish (exit code, root-cause summary), or a signal. On
// SIGINT/SIGTERM/SIGHUP/SIGQUIT (Ctrl-C in salloc, scancel, the time limit)
// drun says so at once and writes the signal's notice on the lifeline
// (agent_launch.h), so every agent stops its workers with that same signal
// and the --shutdown-timeout grace (under scancel Slurm signals the agents'
// step as well; the agents take both for one stop), waits for srun, and
// prints the summary; a second signal has srun kill the step at once.
// SIGUSR1/SIGUSR2 reach the workers through srun. If srun ends before the
// job does (an agent died, so --kill-on-bad-exit ended the step), drun names
// the lost node(s).
#ifndef DRUN_LAUNCHER_SLURM_SLURM_LAUNCHER_H_
#define DRUN_LAUNCHER_SLURM_SLURM_LAUNCHER_H_

#include <map>
#include <string>
#include <vector>

#include "launcher/job/cli.h"

namespace drun {

// srun's command line for `nodes` agents running `drun_path agent`.
std::vector<std::string> SrunAgentArgv(const std::string& srun, int nodes,
                                       const std::string& drun_path);

// Runs the job and returns drun's exit code. `spec` is the resolved job
// (SlurmLauncherDefaults applied), `token` the job token ("" draws a random
// one), `env` drun's environment.
int RunSlurmLauncher(const CommandLine& cl, const v1::JobSpec& spec, const std::string& token,
                     const std::map<std::string, std::string>& env);

}  // namespace drun

#endif  // DRUN_LAUNCHER_SLURM_SLURM_LAUNCHER_H_

// The ssh launcher: `drun --hostfile hosts train.py` / `drun -H a,b:2 train.py`.
//
// In this process: the rendezvous server (and its per-round c10d store). On
// every host: one `drun agent`, started over an ssh exec channel (libssh) or
// with `--rsh CMD` as a local child `CMD HOST <drun> agent`, reading the job
// (its own JobSpec, the token, where to dial back) on its standard input,
// which then stays open as its lifeline.
//
// Promises:
//  - Pre-flight on every host at once before anything starts (reachable, host
//    key known, login accepted, drun runnable at the same path or
//    --remote-drun, the script present): one line per failing host, exit 1,
//    nothing started.
//  - Every host's output reaches this console as it comes, partial lines
//    (prompts, progress bars) within about 100 ms, two hosts' bytes never on
//    one line (ssh_console.h); before the job starts a host's lines are held.
//  - This process's stdin (unless --stdin none) goes to every agent as
//    lifeline notices (agent_launch.h); each agent hands it to its workers
//    --stdin names (global rank 0 by default), the others read end-of-file.
//  - Hosts past --nnodes MAX are hot spares: their agents start with the
//    others and wait in the rendezvous, which puts one in the place of a lost
//    node. A host whose agent ended or was lost is started again (as a spare
//    if the job is full) unless its agent has failed twice.
//  - Ctrl-C/SIGTERM/SIGHUP/SIGQUIT go to every agent as a notice on its
//    standard input (agent_launch.h): each stops its workers with that same
//    signal and --shutdown-timeout's grace, as a local drun would. A second
//    one has them kill their workers, and drops the connections. If this
//    process dies or a connection is lost, the agent's standard input ends
//    with no notice: it stops its workers with SIGHUP (and the grace).
//    SIGUSR1/SIGUSR2 go the same way to every worker, stopping nothing.
//  - With log files, every host writes under one run directory that this
//    process made in its own --log-dir (an unwritable one: one line, exit 2,
//    nothing started); at the end every host's files are there, copied from
//    the hosts that do not share the file system (ssh_logs.h), and one line
//    says where; a host whose logs could not be copied gets a line naming
//    HOST:DIR, where they stay.
#ifndef DRUN_LAUNCHER_SSH_SSH_LAUNCHER_H_
#define DRUN_LAUNCHER_SSH_SSH_LAUNCHER_H_

#include <map>
#include <string>

#include "drun/v1/job.pb.h"
#include "launcher/job/cli.h"

namespace drun {

// Runs the job over ssh and returns drun's exit code. Must be called before
// this process has started any thread (it blocks the stop signals).
int RunSshLauncher(const CommandLine& cl, const v1::JobSpec& spec, const std::string& token,
                   const std::map<std::string, std::string>& env);

}  // namespace drun

#endif  // DRUN_LAUNCHER_SSH_SSH_LAUNCHER_H_

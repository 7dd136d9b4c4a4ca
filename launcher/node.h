// What both entry points (main_light.cc: `drun`, main_net.cc: `drun-net`) do
// to run this process as a node of a job: the steps before the agent starts,
// and the single-node job itself. Links no gRPC.
#ifndef DRUN_LAUNCHER_NODE_H_
#define DRUN_LAUNCHER_NODE_H_

#include <string>

#include "absl/status/statusor.h"
#include "agent/agent.h"
#include "agent/agent_options.h"
#include "agent/nproc.h"
#include "agent/worker_env.h"
#include "launcher/job/cli.h"

namespace drun {

// Writes "drun: <message>" to stderr and returns `code`.
int Fail(int code, const std::string& message);

// The job is over and everything drun owes is written (report, summary,
// logs: Agent::Run has flushed them) and its workers and guardian are gone:
// leave without unwinding gRPC and the other libraries.
[[noreturn]] void QuickExit(int code);

std::string Hostname();

// How this process runs its agent.
enum class AgentRole {
  kSingleNode,   // RunSingleNode: the rendezvous is in this process
  kNetworkNode,  // a node typed on every node (static, c10d) or a task of an srun step
  kLaunched,     // `drun agent`, started by the ssh launcher or --launcher slurm: its
                 // launcher is on standard input (the lifeline) and prints the job's end
};

// What the modes give MakeAgentOptions; everything else follows from them.
struct AgentSetup {
  AgentRole role = AgentRole::kSingleNode;
  v1::JobSpec spec;  // resolved: every default is in it (launcher/job/cli.h)
  NprocPlan nproc;
  // drun's own environment: the workers' base, and where `drun stacks` looks
  // for this agent ($XDG_RUNTIME_DIR/drun, else /tmp/drun-UID).
  EnvMap env;
  std::string hostname;  // "": this machine's (Hostname())
  std::string advertise_addr;
  SocketIface socket_iface;
  // --summary and --report of this process's command line; a launched agent
  // has none (its launcher writes the table and the report).
  bool summary = false;
  std::string report_path;
  bool launcher_reports_end = false;  // kLaunched: as the AgentLaunch says
  bool console_relay = false;         // kLaunched: as the AgentLaunch says
  bool launcher_announces_start = false;  // kLaunched: as the AgentLaunch says
  bool members_are_tasks = false;     // kNetworkNode in Slurm's task mode
  // kNetworkNode under srun without the rendezvous server: the node that
  // hosts it prints the job's one summary; this one prints a line at most.
  bool summary_elsewhere = false;
};

// The one AgentOptions of this process, for every mode. The control directory
// (drun stacks) is chosen from the same environment the agent keeps, and made;
// when it is unusable, says so in one line and leaves control_dir empty.
AgentOptions MakeAgentOptions(AgentSetup setup);

// The interface of the workers' gloo and NCCL sockets on this node: the one
// --iface picks; else, on many nodes, the one holding `advertise_addr` (this
// node's address toward the rendezvous); else none. Fails in one line when
// --iface picks no interface of this machine.
absl::StatusOr<SocketIface> ChooseSocketIface(const v1::JobSpec& spec, const std::string& advertise_addr,
                                              bool many_nodes);

// What every mode does before anything starts: prints the command line's
// notices, checks the entrypoint on this machine (for modes whose workers run
// here), and gives -r/-t a log directory when none was given. Returns the exit
// code to leave with, or 0 to go on.
int PrepareJob(const CommandLine& cl, const EnvMap& env, bool workers_here, v1::JobSpec* spec);

// Runs a single-node job (JobMode::kSingleNode) in this process and exits.
[[noreturn]] void RunSingleNode(const CommandLine& cl, v1::JobSpec spec, EnvMap env,
                                const std::string& token);

}  // namespace drun

#endif  // DRUN_LAUNCHER_NODE_H_

// AgentOptions: everything an Agent (agent/agent.h) is given about its job and
// its node. Built in one place for every mode (launcher/node.h
// MakeAgentOptions), never field by field at a call site.
//
// Also the two facts about a job that several layers ask: whether it spans
// several nodes (SpansNodes) and whether its run id is torchrun's default
// (RunId).
#ifndef DRUN_AGENT_AGENT_OPTIONS_H_
#define DRUN_AGENT_AGENT_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/nproc.h"
#include "agent/stack_dump.h"
#include "agent/worker_env.h"
#include "drun/v1/job.pb.h"
#include "drun/v1/rendezvous.pb.h"

namespace drun {

// Whether the job may span several nodes (--nnodes above 1). An agent that a
// launcher started (ssh, --launcher slurm) also counts itself among several
// nodes when the job asks for one: AgentOptions::host_in_prefix.
inline bool SpansNodes(const v1::JobSpec& spec) { return spec.max_nodes() > 1; }

// The job's run id: one the user (or --standalone) gave, or torchrun's
// default. The JobSpec carries it as text, torchrun's way ("none" for the
// default, what the workers read as TORCHELASTIC_RUN_ID); this type is how
// drun asks which it is. A run with the default id gets a log directory of
// its own (<log_dir>/none_<unique>), one for the whole job.
class RunId {
 public:
  static RunId Default() { return RunId(std::nullopt); }
  // An empty id is refused by the command line before it gets here.
  static RunId Named(std::string id) {
    return id == kDefaultText ? Default() : RunId(std::move(id));
  }
  static RunId Of(const v1::JobSpec& spec) { return Named(spec.run_id()); }

  bool is_default() const { return !id_.has_value(); }
  // JobSpec.run_id, TORCHELASTIC_RUN_ID, the Hello's run id.
  std::string text() const { return id_ ? *id_ : kDefaultText; }

  bool operator==(const RunId& o) const { return id_ == o.id_; }

 private:
  static constexpr char kDefaultText[] = "none";  // torchrun's
  explicit RunId(std::optional<std::string> id) : id_(std::move(id)) {}
  std::optional<std::string> id_;
};

struct AgentOptions {
  v1::JobSpec spec;
  std::string hostname;
  NprocPlan nproc;
  EnvMap base_env;
  // Console prefix style: "[rank3]: " on one node, "[host:rank3]: " on many;
  // also a <host>/ level in the log directory. True when the job spans
  // several nodes (SpansNodes) or a launcher started this agent.
  bool host_in_prefix = false;
  std::string advertise_addr;  // Hello.addr; empty: the server uses the peer address
  // The interface given to the workers as GLOO_SOCKET_IFNAME and
  // NCCL_SOCKET_IFNAME (launcher/node.h ChooseSocketIface).
  SocketIface socket_iface;
  // A remote agent's ssh channel or srun's stdin, after the launch message:
  // the launcher's forwarded stop signals come on it (agent_launch.h), and
  // its EOF without a signal first means "the launcher is gone": stop the
  // workers with SIGHUP and exit. -1: none.
  int lifeline_fd = -1;
  bool summary = false;     // --summary: print the table even on success
  std::string report_path;  // --report FILE
  // The node that hosts the rendezvous: how many connections its store
  // refused (for the report). Null elsewhere.
  std::function<uint64_t()> refused_connections;
  bool quiet = false;       // --quiet: no progress lines of drun's own
  // A launcher (ssh, --launcher slurm) prints the job's end for every host:
  // no outcome line, table or root cause of this agent's own.
  bool launcher_reports_end = false;
  // The launcher relays this agent's stdout and stderr through something that
  // holds partial lines (AgentLaunch.console_relay, --launcher slurm): the
  // console writes relay frames (agent/output.h Console::RelayFramed).
  bool console_relay = false;
  // The launcher announces the job's start (AgentLaunch.launcher_announces_start,
  // ssh): no "waiting: K of N nodes joined" lines before the first round.
  bool launcher_announces_start = false;
  // srun drun: the node that hosts the rendezvous prints the job's one
  // table (every node's ranks) and root cause; this one (true) sends its
  // node's report there as it ends and leaves the job's news (a round
  // stopping, the nodes awaited, the failure) to it; it still says all of it
  // when it lost the rendezvous.
  bool summary_elsewhere = false;
  // srun drun, the node that hosts the rendezvous: the reports the `others`
  // other nodes sent as they ended (bounded wait), for its one table and
  // --report. Null elsewhere.
  std::function<std::vector<v1::NodeReport>(int others)> gather_node_reports;
  // Where `drun stacks` finds this agent (agent/control_socket.h); empty: nowhere.
  std::string control_dir;
  // Reads where a worker is; empty: stack dumps are not available.
  CaptureFn capture;
  // Slurm's task mode: each member of the rendezvous is a task (one worker),
  // and the progress lines say "tasks", not "nodes".
  bool members_are_tasks = false;
  // drun's version ("0.1.0"), sent in the Hello.
  std::string version;
};

}  // namespace drun

#endif  // DRUN_AGENT_AGENT_OPTIONS_H_

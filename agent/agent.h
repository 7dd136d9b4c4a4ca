// Agent: one per node. Joins the rendezvous, runs the node-setup command and
// the workers of each round it is assigned, reports their outcome, obeys
// Stop/Finish, forwards signals, and returns the job's exit code.
//
// What it decides (which round to run, when to stop, kill, rejoin or exit) is
// AgentMachine's (agent/agent_machine.h): this loop turns descriptors and
// timers into the machine's events and its actions into calls.
//
// The loop is event driven: poll() over a signalfd (SIGCHLD and the forwarded
// signals), the workers' pipes and the rendezvous client's wakeup fd, with a
// timeout from the nearest deadline. Nothing sleeps.
#ifndef DRUN_AGENT_AGENT_H_
#define DRUN_AGENT_AGENT_H_

#include <poll.h>

#include <map>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/control_socket.h"
#include "agent/hang_monitor.h"
#include "agent/log_layout.h"
#include "agent/agent_launch.h"
#include "agent/agent_machine.h"
#include "agent/agent_options.h"
#include "agent/nproc.h"
#include "agent/output.h"
#include "agent/process.h"
#include "agent/rendezvous_client.h"
#include "agent/run_report.h"
#include "agent/stack_dump.h"
#include "agent/worker_env.h"
#include "agent/worker_group.h"
#include "drun/v1/rendezvous.pb.h"
#include "rendezvous/base/poll_set.h"
#include "rendezvous/base/unique_fd.h"

namespace drun {

// The root-cause summary every node prints on a failed job, as lines each
// starting with "drun: ". brief (--quiet): three lines at most.
std::string FormatRootCause(const v1::Failure& f, bool brief = false);

class Agent {
 public:
  Agent(AgentOptions options, std::unique_ptr<RendezvousClient> rdzv, Guardian* guardian);
  ~Agent();
  // Runs the job to its end and returns drun's exit code. Must be called with
  // the signals of kHandledSignals blocked in every thread.
  int Run();

  // The signals the agent handles through its signalfd.
  static void BlockHandledSignals();

 private:
  // The steps of Run(), in order.
  int Start();
  void SendHello(TimePoint now);
  void Converse(TimePoint now);
  std::optional<TimePoint> NextDeadline() const;
  void RegisterFixedFds();
  void RegisterTurnFds();
  void OnWake(TimePoint now);
  int Finish();

  void HandleServer(const v1::ServerMessage& msg, TimePoint now);
  void OnStop(const v1::Stop& stop, TimePoint now);
  void OnFinish(const v1::Finish& f, TimePoint now);
  void OnReject(const v1::Reject& reject, TimePoint now);
  void OnWaiting(const v1::Waiting& w, TimePoint now);
  void OnAssignment(const v1::Assignment& a, TimePoint now);
  void StartSetup(TimePoint now);
  // SIGKILLs and reaps the orphans the job left (agent/process.h), but for
  // --node-setup's until the job ends.
  void EndLeftovers(bool job_end);
  // Names the temporary directory in the control directory (RecordTemporary).
  void RecordTemporaryDir();
  void StartWorkers(TimePoint now);
  void PlaceOutputs(const StdSpec& redirects, const std::vector<int>& filter, WorkerLaunch* l) const;
  void FailStart(const absl::Status& s, TimePoint now);
  // Carries out the machine's actions, in order.
  void Apply(const AgentActions& actions, TimePoint now);
  void Apply(const AgentAction& action, TimePoint now);
  // The group's news for the machine.
  void Step(TimePoint now);
  // `sender`: the pid that sent it (0 when unknown).
  void HandleSignal(int sig, TimePoint now, pid_t sender = 0);
  // The lifeline is readable: a signal the launcher forwards, or its end.
  void ReadLifeline(TimePoint now);
  void ReapChildren(TimePoint now);
  void SendJoin(TimePoint now);
  void ReportFailure(const WorkerExit& e, TimePoint now, bool hung = false);
  // agent_stacks.cc: the control socket, stack dumps and --hang-timeout.
  void OpenControl();
  void SayInterface();
  void SayStdinOutsideRound(const v1::Assignment& a);
  void OnControl(TimePoint now);
  // Who this agent is, for control replies: run id, host, pid, ranks now.
  v1::ControlReply ControlHeader() const;
  // Why this node has no stacks to give now ("" when it has).
  std::string NoStacksReason() const;
  // The server asks this node's stacks for a `drun stacks` somewhere (request `id`).
  void OnStacksWanted(uint64_t id, bool for_hang, TimePoint now);
  // The answer to this agent's StacksRequest: every node's reply.
  void OnStacksGathered(const v1::StacksGathered& g);
  void SendStacksReply(uint64_t id, const v1::ControlReply& reply, TimePoint now);
  std::vector<RankTarget> DumpTargets(TimePoint now) const;
  void StartDump(bool for_hang, TimePoint now);
  void OnDumpDone(TimePoint now);
  std::vector<HangMonitor::Sample> SampleWorkers() const;
  void StartHangWatch(TimePoint now);
  void WatchHang(TimePoint now);
  std::string WriteDumpFile(const std::string& text, bool hang);
  void OnHang(const StackDump& dump, const RunReport::Dump& record, TimePoint now);
  void OnHangFound(const v1::HangFound& found, TimePoint now);
  static int Culprit(const StackDump& dump, int quietest);
  void DeclareHang(const StackDump& dump, int quietest, const std::string& full_text,
                   const std::string& files, TimePoint now);
  void Exit(int code, const std::string& message, const v1::Failure* failure);
  // Before anything joins: proves the report path and the log directory
  // writable and claims this node's log directory of the run (logs_), unless
  // its name comes with the first Assignment (a node typed by hand that does
  // not host the rendezvous: ClaimLogDir there); without --log-dir, makes the
  // error files' temporary directory. Returns false (said why) when they are
  // not writable.
  bool PrepareOutputs();
  // Claims this node's directory of the run `run_name` ("" : a fresh one);
  // false (said why) when it cannot.
  bool ClaimLogDir(const std::string& run_name);
  void OnLogDirClaimed();  // into the report, and said
  void SayLogDir();  // once per node, where its logs are (progress: not under --quiet)
  // drun's stdin is readable: hand it to the workers that read it (from a
  // terminal only while one of them waits for it: StdinReaderWaits).
  void PumpStdin(TimePoint now);
  bool StdinReaderWaits() const;
  // drun's stdin from here or the lifeline: bytes, its end, a terminal's echo.
  void TakeStdin(absl::string_view data, bool end, bool echoed);
  void DeliverStdin();
  void Log(const std::string& line);
  void Info(const std::string& line);  // progress: silent under --quiet
  void RetireGroup();  // records a worker group's outcome and drops it
  void WriteReport(TimePoint now);
  void SendNodeReport();
  void GatherNodeReports();
  // The live status line on a terminal while the rendezvous waits.
  void ShowStatus(TimePoint now);
  void ClearStatus();
  // What the rendezvous' members are called: "nodes", or "tasks" (Slurm's task mode).
  const char* MembersWord() const;

  AgentOptions opt_;
  std::unique_ptr<RendezvousClient> rdzv_;
  Guardian* guardian_;
  Console console_;
  std::unique_ptr<WorkerGroup> group_;
  AgentMachine machine_;
  // What the machine's Exit said (or the loop's own failure).
  int exit_code_ = 0;
  // The name of NCCL's async error handling the workers' torch reads, probed
  // once before the first round (agent/torch_probe.h).
  NcclErrorVar nccl_error_var_ = NcclErrorVar::kBoth;
  std::string exit_message_;
  std::optional<v1::Failure> exit_failure_;
  std::optional<v1::Assignment> assignment_;
  LifelineDecoder lifeline_;
  UniqueFd signal_fd_;
  std::vector<pid_t> setup_leftovers_;  // what --node-setup left running: ends with the job
  std::string temp_record_;  // CONTROL_DIR/PID.tmp, naming the temporary directory
  PollSet poll_;                       // the loop's descriptors and their handlers
  std::vector<PollSet::Id> turn_fds_;  // this turn's registrations (RegisterTurnFds)
  std::vector<pollfd> pipe_fds_;       // the group's pipes this turn
  LogLayout logs_;  // where the log and error files go (made in PrepareOutputs)
  bool forward_stdin_ = false;  // --stdin names a rank (or all): some worker reads drun's stdin
  bool stdin_eof_ = false;
  bool stdin_end_given_ = false;  // the current group was told of stdin's end
  bool group_reads_stdin_ = false;  // a worker of the current group reads drun's stdin
  std::string stdin_backlog_;     // drun's stdin not yet taken by the workers
  bool stdin_tty_ = false;
  // A line typed on drun's terminal that no worker waits for stays in the
  // terminal (for the shell, if no worker ever reads it): stdin is not
  // polled until then, when a worker may have started to wait.
  std::optional<TimePoint> stdin_recheck_;
  bool group_is_setup_ = false;
  bool finish_received_ = false;  // the rendezvous ended the job (its Finish), not this node's loss of it
  RunReport report_;
  TimePoint started_;
  TimePoint join_sent_;
  bool status_tty_ = false;
  std::optional<ControlListener> control_;
  std::vector<UniqueFd> stack_callers_;  // waiting for the dump under way
  std::vector<uint64_t> stack_asks_;      // the server's requests the dump under way answers
  // `drun stacks` callers waiting for every node's answer, by StacksRequest number.
  std::map<uint64_t, std::vector<UniqueFd>> gather_callers_;
  uint64_t gather_seq_ = 0;
  std::unique_ptr<DumpJob> dump_;
  bool dump_for_hang_ = false;  // the dump under way answers a hang
  std::optional<HangMonitor> hang_;  // watching this round's workers (--hang-timeout)
  bool interface_said_ = false;     // SayInterface() spoke
  bool stdin_outside_said_ = false; // SayStdinOutsideRound() spoke
  bool hang_quiet_sent_ = false;     // many nodes: this node said it is quiet (HangQuiet)
  std::vector<RankStack> hang_ranks_;  // many nodes: this node's ranks in its hang dump
  bool status_shown_ = false;
  std::optional<v1::Waiting> waiting_;
  TimePoint waiting_at_;
  std::optional<TimePoint> status_refresh_;
};

}  // namespace drun

#endif  // DRUN_AGENT_AGENT_H_

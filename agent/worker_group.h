// WorkerGroup: the processes of one round on one node (or the node-setup
// command), passive in the style of ninja's SubprocessSet: the agent's event
// loop owns poll() and the signalfd and notifies the group of readable pipes,
// reaped children and the passing of time.
//
// Promises:
//  - every worker leads its own process group, known to the guardian while
//    it may have members;
//  - a worker is finished only when its leader is reaped, its group is empty
//    (leftover grandchildren are SIGKILLed as soon as the leader exits) and
//    its output is drained;
//  - Stop() sends the signal to every live group, and SIGKILL at once when
//    the grace is not positive; SIGKILL once the grace has passed is the
//    caller's, who keeps that deadline (the agent's AgentMachine does, and
//    calls KillNow);
//  - the first non-zero exit seen while not stopping is the group's failure;
//  - log files get the workers' bytes exactly, written by LogPump threads
//    (splice(2) pipe -> file) so that the logs' page-cache copies run beside
//    this loop, on other cores. When this loop needs the bytes too (the
//    console shows them, or a stderr tail), it tee(2)s them into the pump's
//    pipe and then reads exactly those; otherwise the pump reads the
//    worker's pipe itself. A log that cannot be written (ENOSPC, EIO) is
//    closed with one warning line on the console and listed in
//    incomplete_logs(); the worker goes on. A disk slower than the worker
//    holds the worker back (the log loses nothing);
//  - the pump threads are joined when the group goes; a stream is finished
//    only once its pump has drained it;
//  - no worker ever reads drun's terminal: its stdin is a pipe fed by the
//    agent or /dev/null, so it cannot stop on SIGTTIN.
#ifndef DRUN_AGENT_WORKER_GROUP_H_
#define DRUN_AGENT_WORKER_GROUP_H_

#include <poll.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/log_pump.h"
#include "agent/output.h"
#include "agent/process.h"
#include "agent/stack_dump.h"
#include "rendezvous/rendezvous_state.h"
#include "rendezvous/base/signal_name.h"
#include "rendezvous/base/unique_fd.h"

namespace drun {

struct WorkerLaunch {
  std::string prefix;  // console prefix, e.g. "[rank3]: "
  std::string cont_prefix;  // for a line continued on the next console line, e.g. "[rank3]+ "
  int colour = -1;
  int local_rank = -1;  // -1 for the node-setup command
  int rank = -1;
  SpawnRequest request;  // fds are filled in by the group
  bool console_stdout = true;
  bool console_stderr = true;
  std::string stdout_file;  // empty: none
  std::string stderr_file;
  std::string error_file;  // TORCHELASTIC_ERROR_FILE, read on failure
  // Reads drun's standard input through a pipe the group feeds (FeedStdin);
  // otherwise its stdin is /dev/null (end-of-file at once).
  bool reads_drun_stdin = false;
};

struct WorkerExit {
  int local_rank = -1;  // -1 (and rank -1): the --node-setup command, or not_started
  int rank = -1;
  // The node's workers could not be started (WorkerGroup::Start failed): no
  // rank failed.
  bool not_started = false;
  pid_t pid = 0;
  int exit_code = 0;  // 128+N for signal N
  int signal = 0;
  TimePoint when;
  std::vector<std::string> stderr_tail;
  std::string error_message;
};

// What one worker process did, for the run summary and report.
struct WorkerRecord {
  int local_rank = -1;
  int rank = -1;
  pid_t pid = 0;
  TimePoint start;
  TimePoint end;
  bool exited = false;
  int exit_code = 0;  // 128+N for signal N
  int signal = 0;
  long peak_rss_kb = 0;  // the leader's ru_maxrss
  // It died of a signal drun itself sent it to stop the round (another
  // rank's failure, a hang, drun's own stop), not of one from outside.
  bool stopped_by_drun = false;
};

// What the agent's decisions (agent/agent_machine.h) ask of a round's
// processes and read from them. WorkerGroup is the real one; unit tests use a
// fake that records what was asked (as ninja's FakeCommandRunner).
class WorkerProcesses {
 public:
  virtual ~WorkerProcesses() = default;
  // From now on exits are not failures: sends `sig` (0: none) to every live
  // worker. The SIGKILL once `grace` has passed is the caller's (KillNow);
  // WorkerGroup also sends it at once when `grace` is not positive.
  virtual void Stop(int sig, Duration grace) = 0;
  virtual void KillNow() = 0;
  virtual void Forward(int sig) = 0;
  // Every worker is finished (reaped, its process group empty, its output drained).
  virtual bool done() const = 0;
  // Every worker exited 0; false for a group that started none.
  virtual bool all_succeeded() const = 0;
  // The first non-zero exit seen while not stopping.
  virtual const std::optional<WorkerExit>& first_failure() const = 0;
  // The ranks (local ranks where none) of the workers not yet reaped.
  virtual std::vector<int> alive_ranks() const = 0;
};

class WorkerGroup : public WorkerProcesses {
 public:
  WorkerGroup(Guardian* guardian, Console* console);
  ~WorkerGroup() override;  // SIGKILLs whatever is still alive (a last resort)
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Spawns every worker. None when the descriptor limit (ulimit -n) is
  // certain to be reached; on any other error, the ones already started are
  // SIGKILLed at once.
  absl::Status Start(std::vector<WorkerLaunch> launches, TimePoint now);

  void AppendPollFds(std::vector<pollfd>* fds) const;
  // A worker pipe (stdout/stderr readable, or a stdin pipe writable) is ready.
  void OnReady(int fd, short revents);

  // drun's stdin: true when every reading worker took all it was given.
  bool WantsStdin() const;
  void FeedStdin(absl::string_view data);
  // End-of-file on drun's stdin: the readers get end-of-file once fed.
  void EndStdin();
  const std::vector<std::string>& incomplete_logs() const { return incomplete_logs_; }
  // Returns true if `pid` was one of this group's leaders.
  bool OnChildExit(pid_t pid, int status, long maxrss_kb, TimePoint now);
  // Re-checks lingering process groups; call after every batch of reaps.
  void Sweep();

  void Forward(int sig) override;
  void Stop(int sig, Duration grace) override;
  void KillNow() override;

  bool stopping() const { return stopping_; }
  bool done() const override;
  bool all_succeeded() const override;
  const std::optional<WorkerExit>& first_failure() const override { return first_failure_; }
  std::vector<int> alive_ranks() const override;
  std::vector<pid_t> pids() const;
  // Notes which workers printed since the last call (the bytes this loop read
  // and those log pumps moved), so that every worker's last output time is
  // known (Activity::last_output). Call after every wake-up; with streams only
  // a pump reads, NextNote() asks for a wake-up each second to sample them.
  void NoteOutput(TimePoint now);
  std::optional<TimePoint> NextNote() const { return next_note_; }
  // What each live worker printed so far, for --hang-timeout and stack dumps.
  struct Activity {
    int local_rank = -1;
    int rank = -1;
    pid_t pid = 0;
    std::uint64_t output_bytes = 0;
    std::string last_line;
    TimePoint last_output;  // its start when it printed nothing yet
  };
  std::vector<Activity> activity() const;
  std::vector<WorkerRecord> records() const;

 private:
  struct Stream {
    bool is_err = false;
    UniqueFd fd;       // the pipe's read end
    UniqueFd file;     // the log file, or none
    std::string path;  // of the log file
    int console_id = -1;  // -1: not shown on the console
    // A pump thread writes the log (`file` is theirs) until it says the
    // stream ended. Either it reads the worker's pipe itself (`fd` is none),
    // or this loop reads it and first tee(2)s the bytes into `log_pipe`.
    LogPump* pump = nullptr;
    int pump_id = -1;
    bool pumping = false;
    bool finish_sent = false;
    bool pump_reads = false;  // the pump reads the worker's pipe itself
    UniqueFd log_pipe;      // write end of the pump's pipe
    bool log_full = false;  // the pump's pipe is full: wait for POLLOUT on it
    bool draining = false;  // the group is gone: close once the pipe is empty
    bool has_log() const { return file.valid() || pumping; }
  };
  struct Worker {
    WorkerLaunch launch;
    pid_t pid = -1;
    Stream out, err;
    UniqueFd stdin_fd;  // write end of the worker's stdin pipe
    std::string stdin_pending;
    bool stdin_end = false;  // close stdin_fd once stdin_pending is written
    RawTail tail;
    std::uint64_t output_bytes = 0;  // both streams, so far
    std::uint64_t noted_bytes = 0;   // with the pumps', as of the last NoteOutput
    TimePoint last_output;           // when noted_bytes last grew (its start before)
    bool stopped_by_drun = false;    // reaped dead of a signal drun sent it to stop
    LastLine last_line;
    bool exited = false;
    bool group_gone = false;
    int status = 0;
    TimePoint start;
    TimePoint end;
    long maxrss_kb = 0;
  };
  // The child's ends of its pipes, closed in drun once it is spawned.
  struct ChildEnds {
    UniqueFd in, out, err;
  };
  absl::Status OpenStreams(Worker& w, size_t pipe_size, ChildEnds* ends);
  // Hands a stream's log file to a pump thread; loop_reads: this loop reads
  // the worker's pipe too (console, stderr tail).
  absl::Status PumpStream(Stream& st, bool loop_reads, size_t pipe_size);
  // tee(2)s what the worker's pipe holds into the pump's: the byte count,
  // 0 at end-of-file, -1 to try again, -2 to wait (log_full says for what).
  int TeeToPump(Stream& st);
  // Creates the pump threads' objects for `launches` (none without log files).
  void MakePumps(const std::vector<WorkerLaunch>& launches);
  void OnPumpEvents(LogPump* pump);
  // Ends the stream: closes its pipe and shows the console's last partial line.
  void CloseStream(Stream& st);
  // Stops writing a log that failed, with one warning line.
  void LogFailed(Stream& st, int err);
  // Reads at most max_reads chunks; true if the stream may have more.
  bool ReadStream(Worker& w, Stream& st, int max_reads);
  void Drain(Worker& w, Stream& st);
  void Deliver(Worker& w, Stream& st, absl::string_view data);
  void WriteStdin(Worker& w);
  void CloseStreams(Worker& w);
  void CheckGroup(Worker& w);
  static int EstimatedDescriptors(const WorkerLaunch& l);
  // Bytes the worker printed so far, the pumps' included.
  std::uint64_t PrintedBytes(const Worker& w) const;

  Guardian* guardian_;
  Console* console_;
  std::vector<std::unique_ptr<Worker>> workers_;
  bool stopping_ = false;
  int stop_signal_ = 0;     // what Stop() sent (0: none)
  bool killed_ = false;     // KillNow() sent SIGKILL
  std::optional<TimePoint> next_note_;  // the next NoteOutput sample of pump-read streams
  std::optional<WorkerExit> first_failure_;
  std::vector<std::string> incomplete_logs_;
  std::unique_ptr<char[]> buf_;  // one read buffer for every stream
  // Threads that write the logs (agent/log_pump.h says why); joined
  // when the group goes.
  std::vector<std::unique_ptr<LogPump>> pumps_;
  size_t next_out_pump_ = 0;
  size_t next_err_pump_ = 0;
};

// Descriptors a start needs: `base` held before it (-1: unknown), and
// `per_worker` for each of `workers`.
struct DescriptorCount {
  size_t workers = 0;
  int base = -1;
  int per_worker = 0;
};
// A start that failed for want of descriptors (`failed` is ResourceExhausted,
// and `count` needs more than the soft RLIMIT_NOFILE) becomes one line with
// the figures and the fix ("40 workers need about 250 descriptors; ulimit -n
// is 64: raise it (ulimit -n 4096)"); any other failure is returned as is.
absl::Status ExplainDescriptorShortage(const absl::Status& failed, const DescriptorCount& count);

// The message of a TORCHELASTIC_ERROR_FILE written by torch's @record
// ({"message": {"message": "...", "extraInfo": {...}}} or {"message": "..."}),
// or "" when the file is absent or unreadable.
std::string ReadErrorFileMessage(const std::string& path);


}  // namespace drun

#endif  // DRUN_AGENT_WORKER_GROUP_H_

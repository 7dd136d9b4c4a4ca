#include "agent/agent.h"

#include "agent/entrypoint.h"
#include "agent/agent_launch.h"
#include "agent/cpu_placement.h"
#include "agent/handled_signals.h"
#include "agent/python_env.h"
#include "agent/root_cause_hints.h"
#include "agent/torch_probe.h"
#include "agent/std_streams.h"
#include "agent/stdin_wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rendezvous/base/private_files.h"
#include "rendezvous/base/event_loop.h"
#include "rendezvous/base/exit_code.h"
#include "rendezvous/base/random.h"
#include "rendezvous/base/words.h"

namespace drun {

namespace {

constexpr int kHandledSignals[] = {SIGCHLD, SIGINT,  SIGTERM, SIGHUP,
                                   SIGQUIT, SIGUSR1, SIGUSR2};

// "2" for a fixed size, "1..4" for a range.
std::string NodeRange(int min_nodes, int max_nodes) {
  if (min_nodes == max_nodes) return absl::StrCat(max_nodes);
  return absl::StrCat(min_nodes, "..", max_nodes);
}

int FreePort(const std::string& local_addr) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return 0;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (local_addr.empty() || inet_pton(AF_INET, local_addr.c_str(), &sa.sin_addr) != 1) {
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
  }
  int port = 0;
  socklen_t len = sizeof sa;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
    port = ntohs(sa.sin_port);
  }
  return port;
}

AgentMachine::Config MachineConfig(const AgentOptions& opt) {
  AgentMachine::Config c;
  c.node_setup = !opt.spec.node_setup().empty();
  c.shutdown_timeout = SecondsToDuration(opt.spec.shutdown_timeout_s());
  c.launcher_reports_end = opt.launcher_reports_end;
  c.slurm_step = opt.base_env.count("SLURM_STEP_ID") > 0;
  return c;
}

}  // namespace

void Agent::BlockHandledSignals() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : kHandledSignals) sigaddset(&mask, s);
  DropIgnoredSignals(&mask);  // nohup's SIGHUP stays ignored
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
}

Agent::Agent(AgentOptions options, std::unique_ptr<RendezvousClient> rdzv, Guardian* guardian)
    : opt_(std::move(options)),
      rdzv_(std::move(rdzv)),
      guardian_(guardian),
      machine_(MachineConfig(opt_)) {
  if (opt_.console_relay) console_.RelayFramed(opt_.hostname);
}

Agent::~Agent() = default;

void Agent::Log(const std::string& line) {
  // Through the console, so drun's lines never land inside a worker's
  // partial line nor overtake worker output queued before them.
  console_.Text(absl::StrCat(status_shown_ ? "\r\033[K" : "", DrunLine(line)));
  console_.Flush();
}

void Agent::ShowStatus(TimePoint now) {
  status_refresh_.reset();
  if (!status_tty_ || !waiting_ || machine_.state() != AgentMachine::State::kRendezvous) return;
  const auto& w = *waiting_;
  std::string line = absl::StrCat("drun: waiting for ", MembersWord(), ": ", w.joined(), " of ",
                                  NodeRange(w.min_nodes(), w.max_nodes()), " joined");
  if (w.last_call_ms() > 0) {
    auto left = std::chrono::milliseconds(w.last_call_ms()) - (now - waiting_at_);
    auto secs = std::chrono::ceil<std::chrono::seconds>(left).count();
    absl::StrAppend(&line, "; last call closes the round in ", std::max<int64_t>(0, secs), " s");
  }
  // The line already says "waiting for nodes" and the last call; other reasons are news.
  if (w.kind() != v1::Waiting::WAITING_FOR_NODES && w.kind() != v1::Waiting::LAST_CALL &&
      !w.reason().empty()) {
    absl::StrAppend(&line, " (", w.reason(), ")");
  }
  if (report_.rounds_total > 0) absl::StrAppend(&line, "; ", Count(report_.rounds_total, "round"), " so far");
  WriteAll(2, absl::StrCat("\r\033[K", line));
  status_shown_ = true;
  status_refresh_ = now + std::chrono::seconds(1);
}

const char* Agent::MembersWord() const { return opt_.members_are_tasks ? "tasks" : "nodes"; }

void Agent::ClearStatus() {
  if (status_shown_) WriteAll(2, "\r\033[K");
  status_shown_ = false;
  status_refresh_.reset();
  waiting_.reset();
}

void Agent::Info(const std::string& line) {
  if (!opt_.quiet) Log(line);
}

void Agent::RetireGroup() {
  if (group_ && !group_is_setup_) report_.AddAttempt(opt_.hostname, group_->records());
  if (group_) {
    const auto& cut = group_->incomplete_logs();
    report_.incomplete_logs.insert(report_.incomplete_logs.end(), cut.begin(), cut.end());
  }
  const bool setup = group_is_setup_;
  group_.reset();
  // What the --node-setup command left running (a service for the workers)
  // lives until the job ends; what workers left ends with their round.
  if (setup) {
    setup_leftovers_ = AdoptedChildren({guardian_->pid()});
  } else {
    EndLeftovers(/*job_end=*/false);
  }
}

// What the job left behind outside its process groups (a child in a session
// of its own, a daemon) came to this agent, the subreaper: it ends.
void Agent::EndLeftovers(bool job_end) {
  std::vector<pid_t> keep = {guardian_->pid()};
  if (!job_end) keep.insert(keep.end(), setup_leftovers_.begin(), setup_leftovers_.end());
  const int ended = EndAdoptedChildren(keep, std::chrono::seconds(5));
  if (ended > 0) {
    Info(absl::StrCat("ended ", ended, ended == 1 ? " process" : " processes",
                      " the job left running outside its process groups (setsid, a daemon)"));
  }
}

// Under a launcher (ssh, --launcher slurm), which prints one table and writes
// one --report for every host: this node's report goes to it through the
// rendezvous, and the agent waits for the server's word that it arrived
// (2 s at most; a lost stream ends the wait at once).
void Agent::SendNodeReport() {
  if (!(opt_.launcher_reports_end || opt_.summary_elsewhere) || !rdzv_->connected()) return;
  v1::AgentMessage m;
  *m.mutable_node_report() = ToNodeReport(report_);
  rdzv_->Send(m, Clock::now());
  const TimePoint deadline = Clock::now() + std::chrono::seconds(2);
  for (TimePoint now = Clock::now(); now < deadline; now = Clock::now()) {
    while (std::optional<v1::ServerMessage> r = rdzv_->Receive()) {
      if (r->has_report_received() || r->has_finish()) return;  // a finish now: the stream broke
    }
    pollfd p{rdzv_->wakeup_fd(), POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    if (poll(&p, 1, static_cast<int>(left) + 1) < 0 && errno != EINTR) return;
  }
}

void Agent::WriteReport(TimePoint now) {
  report_.run_id = opt_.spec.run_id();
  report_.host = opt_.hostname;
  report_.exit_code = exit_code_;
  report_.message = exit_message_;
  report_.failure = exit_failure_;
  report_.wall_s = std::chrono::duration<double>(now - started_).count();
  if (opt_.refused_connections) report_.refused_connections = opt_.refused_connections();
  GatherNodeReports();
  const bool failed = exit_code_ != 0 && !report_.ranks.empty() && exit_failure_;
  const bool elsewhere = opt_.summary_elsewhere && (failed || exit_code_ == 0);
  if (!opt_.launcher_reports_end && !elsewhere && (opt_.summary || failed)) {
    console_.Text(FormatSummaryTable(report_));
  }
  if (!opt_.report_path.empty()) {
    if (absl::Status st = WriteReportFile(opt_.report_path, report_); !st.ok()) Log(std::string(st.message()));
  }
}

// srun drun's hosting node: one table and one --report of the whole step,
// this node's ranks and those every other node sent as it ended.
void Agent::GatherNodeReports() {
  if (!opt_.gather_node_reports || !assignment_) return;
  if (exit_code_ == 0 && !opt_.summary && opt_.report_path.empty()) return;  // no table, no file
  // Slurm's task mode: every task is a member of one worker.
  const int members = opt_.members_are_tasks ? assignment_->world_size() : assignment_->group_world_size();
  std::vector<v1::NodeReport> others = opt_.gather_node_reports(members - 1);
  if (others.empty()) return;
  report_.nodes.push_back(ToNodeReport(report_));  // its ranks are in the table already
  for (const v1::NodeReport& n : others) report_.AddNode(n);
}

// The run's directory is one for the whole job: named by whoever started it
// (log_run_dir); a node typed by hand that does not host the rendezvous takes
// the host's name from its first Assignment (ClaimLogDir there), and until
// then only the root is proved writable (LogLayout::Prepare).
bool Agent::PrepareOutputs() {
  if (!opt_.report_path.empty()) {
    if (absl::Status st = CheckReportPath(opt_.report_path); !st.ok()) {
      Log(std::string(st.message()));
      return false;
    }
  }
  logs_ = LogLayout(opt_.spec, opt_.hostname, SpansNodes(opt_.spec) || opt_.host_in_prefix);
  if (!logs_.keeps_logs()) {
    // Error files need a home even when no logs are kept; removed at exit.
    if (absl::Status st = logs_.MakeTemporary(); !st.ok()) {
      Log(std::string(st.message()));
    } else {
      guardian_->RemoveOnDeath(logs_.Temporary());  // a kill -9 of drun leaves no /tmp/drun-*
    }
    return true;
  }
  if (absl::Status st = logs_.Prepare(); !st.ok()) {
    Log(std::string(st.message()));
    return false;
  }
  if (logs_.claimed()) OnLogDirClaimed();
  return true;
}

bool Agent::ClaimLogDir(const std::string& run_name) {
  if (absl::Status st = logs_.Claim(run_name); !st.ok()) {
    Log(std::string(st.message()));
    return false;
  }
  OnLogDirClaimed();
  return true;
}

// The report names this node's directory, and the console says it once.
void Agent::OnLogDirClaimed() {
  report_.log_dir = logs_.node_dir();
  report_.log_dir_inode = logs_.node_dir_inode();
  SayLogDir();
}

// Once, where this node's log files are: the run directory's name has a
// unique part no one can guess, and what --redirects sends there is not
// shown on the console at all. A launcher that reports the end says where
// every host's logs are itself.
void Agent::SayLogDir() {
  if (opt_.launcher_reports_end) return;
  const StdSpec redirects = FromProto(opt_.spec.redirects());
  bool hidden = false;
  for (int lr = 0; lr < opt_.nproc.count; ++lr) hidden = hidden || redirects.ForRank(lr).any();
  Info(LogLayout::RunDirLine(logs_.node_dir(), hidden ? "what --redirects sends there is not shown here" : ""));
}

// Typed ahead while no worker waits for input: the line stays in the
// terminal (the shell gets it after the job, as after torchrun or any
// program that does not read it), and is looked at again in 100 ms. A
// worker that does wait gets it then; the kernel has no event for "a reader
// waits on this pipe", so it is this short re-check while a line is pending.
constexpr std::chrono::milliseconds kStdinRecheck{100};

bool Agent::StdinReaderWaits() const {
  if (!group_ || group_is_setup_) return false;
  for (const WorkerRecord& r : group_->records()) {
    if (r.exited || !StdinIncludes(opt_.spec.stdin_target(), r.rank)) continue;
    if (WorkerWaitsForStdin(r.pid) != StdinWait::kNotWaiting) return true;
  }
  return false;
}

void Agent::PumpStdin(TimePoint now) {
  if (stdin_tty_ && !StdinReaderWaits()) {
    stdin_recheck_ = now + kStdinRecheck;
    return;
  }
  char buf[65536];
  ssize_t n = read(0, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    // End-of-file, or EIO for a background job: the readers get end-of-file.
    TakeStdin("", /*end=*/true, /*echoed=*/false);
    return;
  }
  // The terminal echoed the typed line: its cursor is on a fresh line now.
  TakeStdin(absl::string_view(buf, static_cast<size_t>(n)), false,
            stdin_tty_ && buf[n - 1] == '\n');
}

// One path for drun's stdin, read here (PumpStdin) or relayed by a launcher
// on the lifeline: bytes wait in stdin_backlog_ for the workers that read it.
void Agent::TakeStdin(absl::string_view data, bool end, bool echoed) {
  if (!forward_stdin_) return;
  stdin_backlog_.append(data.data(), data.size());
  if (end) stdin_eof_ = true;
  if (echoed) console_.InputEchoed();
  DeliverStdin();
}

// Hands the backlog to the current workers once they took what they had.
// Without workers yet it waits (input typed ahead); a group with no reader
// here (rank 0 runs on another node) drops it; a node-setup group keeps it
// for the workers after it.
void Agent::DeliverStdin() {
  if (!group_) return;
  if (!stdin_backlog_.empty()) {
    if (!group_is_setup_ && !group_reads_stdin_) {
      stdin_backlog_.clear();
    } else if (group_->WantsStdin()) {
      group_->FeedStdin(stdin_backlog_);
      stdin_backlog_.clear();
    }
  }
  if (stdin_eof_ && stdin_backlog_.empty() && !stdin_end_given_) {
    stdin_end_given_ = true;
    group_->EndStdin();
  }
}

int Agent::Run() {
  if (int code = Start(); code != 0) return code;
  nccl_error_var_ = NcclErrorVarFor(ProbeWorkersTorch(opt_.spec, opt_.base_env));
  TimePoint now = Clock::now();
  started_ = now;
  SendHello(now);
  RegisterFixedFds();
  while (machine_.state() != AgentMachine::State::kDone) {
    Converse(now);
    if (machine_.state() == AgentMachine::State::kDone) break;
    console_.Flush();
    RegisterTurnFds();
    const int n = poll_.Poll(NextDeadline());  // runs the ready descriptors' handlers
    now = Clock::now();
    if (n < 0) {
      Log(absl::StrCat("poll failed: ", strerror(errno)));
      exit_code_ = 1;
      break;
    }
    OnWake(now);
  }
  return Finish();
}

// Before the loop: the signalfd, signal dispositions, log and report paths,
// the subreaper bit, stdin and the error-file directory. 0, or the exit code.
int Agent::Start() {
  // --signals-to-handle: the signals left out keep their default action.
  const sigset_t mask = ApplySignalDisposition(opt_.spec);
  signal_fd_.reset(signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd_.valid()) {
    Log(absl::StrCat("cannot create signalfd: ", strerror(errno)));
    return kExitLauncherFailed;
  }
  signal(SIGPIPE, SIG_IGN);
  // drun in a background job reading the terminal gets EIO (taken as
  // end-of-file) instead of stopping.
  signal(SIGTTIN, SIG_IGN);
  if (!PrepareOutputs()) {
    console_.Drain();
    return kExitBadInput;
  }
  BecomeSubreaper();
  // drun's stdin reaches the workers --stdin names: read here, or (a remote
  // agent, whose stdin is its launcher's channel) relayed by the launcher as
  // lifeline notices.
  forward_stdin_ = opt_.spec.stdin_target().mode() != v1::JobSpec::StdinTarget::NONE;
  stdin_tty_ = opt_.lifeline_fd < 0 && isatty(0);
  status_tty_ = isatty(2) && !opt_.spec.quiet() && SpansNodes(opt_.spec);
  OpenControl();  // removes what runs killed with their guardians left (agent/process.h)
  RecordTemporaryDir();
  return 0;
}

// The temporary directory, named in the control directory, so that the next
// drun removes it if this one dies with its guardian.
void Agent::RecordTemporaryDir() {
  if (!control_ || logs_.Temporary().empty()) return;
  temp_record_ = RecordTemporary(opt_.control_dir, logs_.Temporary());
  if (!temp_record_.empty()) guardian_->RemoveOnDeath(temp_record_);
}

// Many nodes: which interface the workers' gloo and NCCL sockets use, once,
// when this node first joins a round (a rejected node says nothing of it),
// unless the user chose (GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME both set).
void Agent::SayInterface() {
  const SocketIface& iface = opt_.socket_iface;
  if (iface.name.empty() || std::exchange(interface_said_, true)) return;
  std::vector<std::string> given;
  for (const char* k : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}) {
    if (!iface.given && (opt_.base_env.count(k) || opt_.spec.env().count(k))) given.push_back(k);
  }
  if (given.size() == 2) return;
  Info(absl::StrCat("gloo and NCCL use interface ", iface.name, " (", iface.why, ")",
                    given.empty() ? "" : absl::StrCat("; ", given[0], " as you set it"),
                    iface.given ? "" : "; --iface NAME|CIDR chooses another"));
}

// --stdin RANK in an elastic job whose round is smaller than RANK (the command
// line refuses it where the world size is known first): the node of group rank
// 0 says once that no rank reads drun's stdin.
void Agent::SayStdinOutsideRound(const v1::Assignment& a) {
  const auto& t = opt_.spec.stdin_target();
  if (t.mode() != v1::JobSpec::StdinTarget::RANK || t.rank() < a.world_size() || a.group_rank() != 0 ||
      std::exchange(stdin_outside_said_, true)) {
    return;
  }
  Log(absl::StrCat("--stdin ", t.rank(), ": this round has ranks 0 to ", a.world_size() - 1,
                   ", so no rank reads drun's stdin; write one of them, all or none"));
}

void Agent::SendHello(TimePoint now) {
  v1::AgentMessage hello;
  auto* h = hello.mutable_hello();
  h->set_run_id(opt_.spec.run_id());
  h->set_hostname(opt_.hostname);
  h->set_local_world_size(opt_.nproc.count);
  h->set_requested_node_rank(opt_.spec.node_rank());
  h->set_addr(opt_.advertise_addr);
  h->set_version(opt_.version);
  rdzv_->Send(hello, now);
  Apply(machine_.Start(now), now);
}

// Step() may send, and an in-process rendezvous answers at once: go on until
// neither side has anything left to say.
void Agent::Converse(TimePoint now) {
  for (bool progress = true; progress;) {
    progress = false;
    while (auto msg = rdzv_->Receive()) {
      HandleServer(*msg, now);
      progress = true;
    }
    Step(now);
    if (auto msg = rdzv_->Receive()) {
      HandleServer(*msg, now);
      progress = true;
    }
  }
}

// The nearest of every part's deadline (none: wait for an event).
std::optional<TimePoint> Agent::NextDeadline() const {
  std::optional<TimePoint> deadline = rdzv_->NextDeadline();
  auto consider = [&](std::optional<TimePoint> t) {
    if (t && (!deadline || *t < *deadline)) deadline = t;
  };
  consider(status_refresh_);
  consider(stdin_recheck_);
  consider(machine_.NextDeadline());  // the workers' SIGKILL after a stop's grace
  if (hang_) consider(hang_->NextSample());
  if (group_) consider(group_->NextNote());  // the workers' last output time
  consider(console_.NextDeadline());
  return deadline;
}

// The descriptors of every turn, each with its handler (rendezvous/base/poll_set.h).
void Agent::RegisterFixedFds() {
  poll_.Add(signal_fd_.get(), POLLIN, [this](short) {
    const TimePoint now = Clock::now();
    DrainSignalFd(signal_fd_.get(), [&](int sig, const signalfd_siginfo& si) {
      if (sig == SIGCHLD) {
        ReapChildren(now);
      } else {
        HandleSignal(sig, now, static_cast<pid_t>(si.ssi_pid));
      }
    });
  });
  // The rendezvous client's messages are read by Converse at the loop's top.
  poll_.Add(rdzv_->wakeup_fd(), POLLIN, [](short) {});
}

// This turn's other descriptors, which come and go with the lifeline, stdin,
// the control socket, a dump, the console's blocked outputs and the group's
// pipes: last turn's are dropped and these registered anew.
void Agent::RegisterTurnFds() {
  for (PollSet::Id id : turn_fds_) poll_.Remove(id);
  turn_fds_.clear();
  auto add = [&](int fd, short events, PollSet::Handler handler) {
    turn_fds_.push_back(poll_.Add(fd, events, std::move(handler)));
  };
  if (opt_.lifeline_fd >= 0) add(opt_.lifeline_fd, POLLIN, [this](short) { ReadLifeline(Clock::now()); });
  if (opt_.lifeline_fd < 0 && forward_stdin_ && !stdin_eof_ && group_ && group_->WantsStdin() &&
      !stdin_recheck_) {
    add(0, POLLIN, [this](short) { PumpStdin(Clock::now()); });
  }
  if (control_) add(control_->fd(), POLLIN, [this](short) { OnControl(Clock::now()); });
  if (dump_) add(dump_->done_fd(), POLLIN, [this](short) { OnDumpDone(Clock::now()); });
  // Writable again: the flush at the loop's top sends the queue.
  for (int fd : console_.BlockedFds()) add(fd, POLLOUT, [](short) {});
  if (!group_) return;
  pipe_fds_.clear();
  group_->AppendPollFds(&pipe_fds_);
  for (const pollfd& p : pipe_fds_) {
    add(p.fd, p.events, [this, fd = p.fd](short revents) {
      if (group_) group_->OnReady(fd, revents);
    });
  }
}

// After the events of one wake-up: time-driven work of every part.
void Agent::OnWake(TimePoint now) {
  if (stdin_recheck_ && now >= *stdin_recheck_) stdin_recheck_.reset();  // stdin is polled again
  DeliverStdin();
  console_.ShowPartials(now);
  // A SIGCHLD can be merged with one already pending; reaping on every
  // wake-up costs one syscall and never misses an exit.
  ReapChildren(now);
  if (group_) group_->NoteOutput(now);
  Apply(machine_.OnTick(now), now);
  WatchHang(now);
  rdzv_->OnTick(now);
  if (status_refresh_ && now >= *status_refresh_) ShowStatus(now);
}

// After the loop: the job's end on the console and in the report, then the
// workers' and the error files' cleanup. Returns the exit code.
int Agent::Finish() {
  // No more `drun stacks` callers: the socket file goes now, since drun may
  // _exit without running destructors.
  control_.reset();
  ClearStatus();
  console_.Flush();
  // The table first, the root cause last: it is what the user reads when
  // drun returns, however many ranks the table has.
  WriteReport(Clock::now());
  SendNodeReport();
  // The job's end came from the rendezvous, whose node prints it (a lost
  // rendezvous is this node's news: said in full).
  const bool said_elsewhere = opt_.summary_elsewhere && finish_received_;
  if (exit_code_ != 0 && !said_elsewhere && !opt_.launcher_reports_end) {
    if (!exit_message_.empty()) Log(exit_message_);
    if (exit_failure_) console_.Text(FormatRootCause(*exit_failure_, opt_.quiet));
  }
  console_.Drain();
  // Normally every worker is gone by now; if the loop broke early, the
  // group's destructor kills what is left (drun may _exit right after).
  // RetireGroup did not when the loop broke early; --node-setup's end here.
  if (group_ || !setup_leftovers_.empty()) {
    group_.reset();
    EndLeftovers(/*job_end=*/true);
  }
  logs_.RemoveTemporary();
  if (!temp_record_.empty()) unlink(temp_record_.c_str());
  return exit_code_;
}

void Agent::ReapChildren(TimePoint now) {
  int status;
  pid_t pid;
  struct rusage ru;
  while ((pid = wait4(-1, &status, WNOHANG, &ru)) > 0) {
    if (group_) group_->OnChildExit(pid, status, ru.ru_maxrss, now);
  }
  if (group_) group_->Sweep();
}

void Agent::SendJoin(TimePoint now) {
  v1::AgentMessage m;
  int port = 0;
  if (!opt_.spec.agent_store() && opt_.spec.master_port() == 0) {
    port = FreePort(opt_.spec.local_addr());
  }
  m.mutable_join()->set_free_port(port);
  join_sent_ = now;
  rdzv_->Send(m, now);
}

void Agent::HandleServer(const v1::ServerMessage& msg, TimePoint now) {
  switch (msg.kind_case()) {
    case v1::ServerMessage::kAssignment:
      return OnAssignment(msg.assignment(), now);
    case v1::ServerMessage::kStop:
      return OnStop(msg.stop(), now);
    case v1::ServerMessage::kFinish:
      return OnFinish(msg.finish(), now);
    case v1::ServerMessage::kReject:
      return OnReject(msg.reject(), now);
    case v1::ServerMessage::kWaiting:
      return OnWaiting(msg.waiting(), now);
    case v1::ServerMessage::kStacksWanted:
      return OnStacksWanted(msg.stacks_wanted().request_id(), msg.stacks_wanted().for_hang(), now);
    case v1::ServerMessage::kStacksGathered:
      return OnStacksGathered(msg.stacks_gathered());
    case v1::ServerMessage::kHangFound:
      return OnHangFound(msg.hang_found(), now);
    case v1::ServerMessage::kHeartbeat:
    case v1::ServerMessage::kChallenge:  // the job token's handshake: the client's (join_auth.h)
    case v1::ServerMessage::kWelcome:
    case v1::ServerMessage::kPace:  // the client's (grpc_rendezvous_client.h)
    case v1::ServerMessage::kReportReceived:  // awaited in SendNodeReport
    case v1::ServerMessage::KIND_NOT_SET:
      return;
  }
}

void Agent::OnStop(const v1::Stop& stop, TimePoint now) {
  if ((SpansNodes(opt_.spec) || opt_.spec.max_restarts() > 0) && !opt_.summary_elsewhere) {
    Info(absl::StrCat("stopping round ", stop.round(), ": ", stop.reason()));
  }
  Apply(machine_.OnStop(now), now);
}

void Agent::OnFinish(const v1::Finish& f, TimePoint now) {
  finish_received_ = true;
  Apply(machine_.OnFinish(f, now), now);
}

void Agent::OnReject(const v1::Reject& reject, TimePoint now) {
  Apply(machine_.OnReject(absl::StrCat("the rendezvous (", rdzv_->Describe(),
                                       ") rejected this node: ", reject.message()),
                          now),
        now);
}

void Agent::OnWaiting(const v1::Waiting& w, TimePoint now) {
  if (w.kind() == v1::Waiting::FINISHED) {
    if (SpansNodes(opt_.spec)) {
      Info(absl::StrCat("done: the workers here all succeeded; waiting for the other ", MembersWord(),
                        " to finish"));
    }
    return;
  }
  if (w.kind() == v1::Waiting::LAST_RUNNER_SILENT) return Log(w.reason());
  if (status_tty_) {
    waiting_ = w;
    waiting_at_ = now;
    ShowStatus(now);
    return;
  }
  // The job's news, said by the node that hosts it; and a node that joins
  // while the round stops waits for the next one, which the stop's line said.
  if (!SpansNodes(opt_.spec) || opt_.summary_elsewhere || w.kind() == v1::Waiting::ROUND_STOPPING) return;
  // The launcher says when the job starts: nodes still to come are its news.
  const bool before_start = w.kind() == v1::Waiting::WAITING_FOR_NODES || w.kind() == v1::Waiting::LAST_CALL;
  if (opt_.launcher_announces_start && before_start && report_.rounds_total == 0) return;
  // The server's words are about nodes; in Slurm's task mode its members are tasks.
  const bool for_members = w.kind() == v1::Waiting::WAITING_FOR_NODES;
  std::string text = absl::StrCat("waiting: ", w.joined(), " of ", NodeRange(w.min_nodes(), w.max_nodes()), " ",
                                  MembersWord(), " joined (",
                                  for_members ? absl::StrCat("waiting for ", MembersWord()) : w.reason(), ")");
  if (w.last_call_ms() > 0) {
    absl::StrAppend(&text, "; the round closes in ", w.last_call_ms() / 1000.0, " s");
  }
  Info(text);
}

void Agent::OnAssignment(const v1::Assignment& a, TimePoint now) {
  const AgentActions start = machine_.OnAssignment(a.round(), now);
  if (start.empty()) return;  // stopping on a signal: no new round
  ClearStatus();
  SayInterface();
  SayStdinOutsideRound(a);
  if (logs_.keeps_logs() && !logs_.claimed() && !ClaimLogDir(a.spec().log_run_dir())) {
    // The root was writable a moment ago; the workers run, shown on the console only.
    report_.incomplete_logs.push_back(opt_.spec.log_dir());
  }
  assignment_ = a;
  RoundStats rs;
  rs.round = a.round();
  rs.rendezvous_s = std::chrono::duration<double>(now - join_sent_).count();
  rs.group_rank = a.group_rank();
  rs.world_size = a.world_size();
  rs.restart_count = a.restart_count();
  report_.AddRound(rs);
  if (a.use_agent_store() && a.master_addr().empty()) {
    // The store is the rendezvous host's; --master-addr names it when given.
    assignment_->set_master_addr(opt_.spec.master_addr().empty() ? rdzv_->server_host()
                                                                  : opt_.spec.master_addr());
  }
  Apply(start, now);
}

void Agent::StartSetup(TimePoint now) {
  EnvMap env = opt_.base_env;
  for (const auto& [k, v] : opt_.spec.env()) env[k] = v;
  // "$PYTHON_EXEC prepare.py" runs the workers' interpreter, set or not.
  if (env.find("PYTHON_EXEC") == env.end()) env["PYTHON_EXEC"] = PythonInterpreter(opt_.spec, env);
  WorkerLaunch l;
  // Like the workers': on several nodes the host says whose setup it is.
  const std::string tag =
      opt_.host_in_prefix ? absl::StrCat("[", opt_.hostname, ":setup]") : std::string("[setup]");
  l.prefix = tag + ": ";
  l.cont_prefix = tag + "+ ";
  l.request.argv = {"/bin/sh", "-c", opt_.spec.node_setup()};
  l.request.env = EnvToList(env);
  l.request.cwd = opt_.spec.working_dir();
  group_ = std::make_unique<WorkerGroup>(guardian_, &console_);
  group_is_setup_ = true;
  stdin_end_given_ = false;
  std::vector<WorkerLaunch> launches;
  group_reads_stdin_ = false;
  launches.push_back(std::move(l));
  if (absl::Status s = group_->Start(std::move(launches), now); !s.ok()) {
    // A setup that did not start is a failed setup (the machine says it).
    WorkerExit e;
    e.exit_code = 1;
    e.error_message = std::string(s.message());
    Apply(machine_.OnStartFailed(e, now), now);
  }
}

void Agent::StartWorkers(TimePoint now) {
  const v1::Assignment& a = *assignment_;
  const v1::JobSpec& spec = opt_.spec;
  const StdSpec redirects = FromProto(spec.redirects());
  const std::vector<int> filter(spec.local_ranks_filter().begin(), spec.local_ranks_filter().end());
  const std::string python = PythonInterpreter(spec, opt_.base_env);

  // GPUs (gpu:LIST, --virtual-local-rank) and CPUs (--numa-binding) per local rank.
  auto placements = PlaceWorkers(spec, WithForwardedEnv(opt_.base_env, spec), opt_.nproc);
  if (!placements.ok()) {
    // An empty group, done at once: the machine's stop after the failure completes.
    group_ = std::make_unique<WorkerGroup>(guardian_, &console_);
    group_is_setup_ = false;
    FailStart(placements.status(), now);
    return;
  }
  std::vector<WorkerLaunch> launches;
  group_reads_stdin_ = false;
  const int n = opt_.nproc.count;
  for (int lr = 0; lr < n; ++lr) {
    WorkerLaunch l;
    l.local_rank = lr;
    l.rank = a.rank_offset() + lr;
    l.colour = l.rank;
    LinePrefixes p = WorkerPrefixes(spec.log_line_prefix_template(), {spec.role(), lr, l.rank, opt_.hostname},
                                    opt_.host_in_prefix);
    l.prefix = std::move(p.line);
    l.cont_prefix = std::move(p.cont);
    l.reads_drun_stdin = forward_stdin_ && !(stdin_eof_ && stdin_backlog_.empty()) &&
                         StdinIncludes(spec.stdin_target(), l.rank);
    PlaceOutputs(redirects, filter, &l);

    WorkerEnvInput in;
    in.local_rank = lr;
    in.local_world_size = n;
    in.error_file = l.error_file;
    in.cuda_visible_device = (*placements)[lr].cuda_visible_device;
    in.omp_threads = (*placements)[lr].omp_threads;
    in.socket_iface = opt_.socket_iface;
    in.nccl_error_var = nccl_error_var_;
    EnvMap env = BuildWorkerEnv(opt_.base_env, spec, a, in);
    l.request.cpus = (*placements)[lr].cpus;

    l.request.argv = WorkerArgv(spec, python);
    l.request.env = EnvToList(env);
    l.request.cwd = spec.working_dir();
    group_reads_stdin_ = group_reads_stdin_ || l.reads_drun_stdin;
    launches.push_back(std::move(l));
  }
  group_ = std::make_unique<WorkerGroup>(guardian_, &console_);
  group_is_setup_ = false;
  stdin_end_given_ = false;
  if (absl::Status s = group_->Start(std::move(launches), now); !s.ok()) {
    FailStart(s, now);
    return;
  }
  StartHangWatch(now);
}

// Where a worker's streams go: its log files and error file (LogLayout decides
// which), and whether the console shows them.
void Agent::PlaceOutputs(const StdSpec& redirects, const std::vector<int>& filter, WorkerLaunch* l) const {
  const int lr = l->local_rank;
  LogLayout::RankFiles files = logs_.ForRank(assignment_->round(), lr);
  l->error_file = std::move(files.error_file);
  l->stdout_file = std::move(files.stdout_log);
  l->stderr_file = std::move(files.stderr_log);
  const bool shown = filter.empty() || std::find(filter.begin(), filter.end(), lr) != filter.end();
  l->console_stdout = shown && !redirects.ForRank(lr).out;
  l->console_stderr = shown && !redirects.ForRank(lr).err;
}

// The workers could not be started at all: that is the round's failure.
void Agent::FailStart(const absl::Status& s, TimePoint now) {
  WorkerExit e;
  e.exit_code = 1;
  e.error_message = std::string(s.message());
  // The node's limit, not a rank (nor its --node-setup command), failed.
  e.not_started = true;
  Apply(machine_.OnStartFailed(e, now), now);
}

void Agent::Apply(const AgentActions& actions, TimePoint now) {
  for (const AgentAction& a : actions) Apply(a, now);
}

void Agent::Apply(const AgentAction& a, TimePoint now) {
  v1::AgentMessage m;
  switch (a.kind) {
    case AgentAction::kSendJoin:
      return SendJoin(now);
    case AgentAction::kStartSetup:
      return StartSetup(now);
    case AgentAction::kStartWorkers:
      return StartWorkers(now);
    case AgentAction::kReportFailure:
      return ReportFailure(a.failure, now, a.hung);
    case AgentAction::kReportSuccess:
      m.mutable_succeeded()->set_round(a.round);
      return rdzv_->Send(m, now);
    case AgentAction::kSendLeaving:
      m.mutable_leaving()->set_signal(a.signal);
      return rdzv_->Send(m, now);
    case AgentAction::kStopGroup:
      hang_.reset();  // a stopping round makes no progress to watch
      [[fallthrough]];
    case AgentAction::kKillGroup:
    case AgentAction::kForwardSignal:
      if (group_) ApplyToGroup(a, group_.get());
      return;
    case AgentAction::kRetireGroup:
      return RetireGroup();
    case AgentAction::kSay:
      return Log(a.text);
    case AgentAction::kExit:
      exit_code_ = a.exit_code;
      exit_message_ = a.text;
      exit_failure_ = a.exit_failure;
      return;
  }
}

void Agent::ReportFailure(const WorkerExit& e, TimePoint now, bool hung) {
  v1::AgentMessage m;
  auto* f = m.mutable_failed();
  f->set_round(assignment_ ? assignment_->round() : 0);
  auto* fl = f->mutable_failure();
  fl->set_host(opt_.hostname);
  fl->set_group_rank(assignment_ ? assignment_->group_rank() : 0);
  fl->set_rank(e.rank);
  fl->set_local_rank(e.local_rank);
  fl->set_pid(e.pid);
  fl->set_exit_code(e.exit_code);
  fl->set_signal(e.signal);
  fl->set_attempt(assignment_ ? assignment_->round() : 0);
  for (const auto& line : e.stderr_tail) fl->add_stderr_tail(line);
  fl->set_error_message(e.error_message);
  fl->set_hung(hung);
  fl->set_not_started(e.not_started);
  if (e.rank >= 0) {
    fl->set_program(WorkerProgram(opt_.spec, opt_.base_env));
    if (opt_.spec.kind() != v1::JobSpec::PROGRAM) *fl->mutable_python_env() = InspectPythonEnv(fl->program());
    fl->set_use_libuv_off(UseLibuvOff(WithForwardedEnv(opt_.base_env, opt_.spec)));
  }
  fl->set_time_unix_s(
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  rdzv_->Send(m, now);
}

void Agent::Step(TimePoint now) {
  if (group_) Apply(machine_.OnGroup(StatusOf(*group_), now), now);
}

void Agent::ReadLifeline(TimePoint now) {
  char buf[65536];
  ssize_t r = read(opt_.lifeline_fd, buf, sizeof buf);
  if (r > 0) {
    LifelineNotices notices;
    lifeline_.Feed(buf, static_cast<size_t>(r), &notices);
    if (!notices.input.empty() || notices.input_end || notices.echoed) {
      TakeStdin(notices.input, notices.input_end, notices.echoed);
    }
    for (int sig : notices.signals) Apply(machine_.OnLauncherSignal(sig, now), now);
    return;
  }
  if (r < 0 && (errno == EINTR || errno == EAGAIN)) return;
  opt_.lifeline_fd = -1;
  Apply(machine_.OnLauncherGone(now), now);
}

void Agent::HandleSignal(int sig, TimePoint now, pid_t sender) {
  Apply(machine_.OnSignal(sig, sender > 1 && sender == getppid(), now), now);
}

std::string FormatRootCause(const v1::Failure& f, bool brief) {
  std::vector<std::string> lines;
  if (brief) {
    std::string who = f.not_started() ? "the workers (none could start)"
                      : f.rank() < 0      ? "the --node-setup command"
                                          : absl::StrCat("rank ", f.rank(), " (local rank ", f.local_rank(), ")");
    std::string how = f.hung()           ? std::string("hung (--hang-timeout)")
                       : f.signal() > 0 ? absl::StrCat("killed by ", SignalName(f.signal()))
                                        : absl::StrCat("exit code ", f.exit_code());
    lines.push_back(absl::StrCat("root cause: ", who, " on ", f.host(), ", ", how, ", attempt ",
                                 f.attempt()));
    if (!f.error_message().empty()) {
      lines.push_back(absl::StrCat("  error: ", f.error_message()));
    } else if (f.stderr_tail_size() > 0) {
      lines.push_back(absl::StrCat("  last stderr line: ", f.stderr_tail(f.stderr_tail_size() - 1)));
    }
    std::string out;
    for (const auto& l : lines) absl::StrAppend(&out, DrunLine(l));
    return out;
  }
  lines.push_back("===== root cause: first failure =====");
  lines.push_back(absl::StrCat("  host:       ", f.host()));
  if (f.not_started()) {
    lines.push_back("  rank:       none (this node could not start its workers)");
  } else if (f.rank() < 0) {
    lines.push_back("  rank:       none (the --node-setup command)");
  } else {
    lines.push_back(absl::StrCat("  rank:       ", f.rank(), " (local rank ", f.local_rank(),
                                 ", group rank ", f.group_rank(), ")"));
  }
  // No process: the workers could not be started (pid 0 would name none).
  lines.push_back(f.pid() > 0 ? absl::StrCat("  pid:        ", f.pid())
                              : std::string("  pid:        none (not started)"));
  if (f.hung()) {
    lines.push_back(absl::StrCat("  exit:       hung (--hang-timeout), exit ", f.exit_code()));
  } else if (f.signal() > 0) {
    lines.push_back(absl::StrCat("  exit:       signal ", SignalName(f.signal()), " (exit ",
                                 f.exit_code(), ")"));
  } else {
    lines.push_back(absl::StrCat("  exit:       code ", f.exit_code()));
  }
  lines.push_back(absl::StrCat("  attempt:    ", f.attempt()));
  if (!f.error_message().empty()) {
    lines.push_back(absl::StrCat("  error:      ", f.error_message()));
  }
  if (f.stderr_tail_size() > 0) {
    lines.push_back(absl::StrCat("  stderr (last ", Count(f.stderr_tail_size(), "line"), "):"));
    for (const auto& l : f.stderr_tail()) lines.push_back(absl::StrCat("    ", l));
  }
  for (const auto& hint : RootCauseHints(f)) lines.push_back(absl::StrCat("hint: ", hint));
  std::string out;
  for (const auto& l : lines) absl::StrAppend(&out, DrunLine(l));
  return out;
}

}  // namespace drun

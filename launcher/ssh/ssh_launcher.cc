#include "launcher/ssh/ssh_launcher.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <map>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/agent_launch.h"
#include "agent/handled_signals.h"
#include "agent/output.h"
#include "agent/process.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/event_loop.h"
#include "launcher/job/cli.h"
#include "launcher/job_control.h"
#include "launcher/job_host.h"
#include "launcher/node.h"
#include "launcher/ssh/ssh_console.h"
#include "launcher/ssh/ssh_logs.h"
#include "launcher/ssh/ssh_plan.h"
#include "launcher/ssh/ssh_rsh.h"
#include "launcher/ssh/ssh_session.h"
#include "rendezvous/base/clock.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/poll_set.h"
#include "rendezvous/base/random.h"
#include "rendezvous/base/signal_name.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/wake_fd.h"
#include "rendezvous/base/exit_code.h"

namespace drun {

namespace {

// Taken through a signalfd: the stop signals, and SIGUSR1/SIGUSR2, which the
// workers get too (a checkpoint request) without stopping anything.
constexpr int kHandledSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
bool IsUserSignal(int sig) { return sig == SIGUSR1 || sig == SIGUSR2; }
// How often a host that did not answer is tried again once the job runs
// (docs/ssh.md "Hosts that are off").
constexpr Duration kRetryInterval = std::chrono::seconds(5);
// How long a running job waits with fewer than MIN hosts in it (the others cut
// off, switched off, or starting a new agent) before it fails naming them:
// this, or half the join timeout when that is shorter, so that it comes before
// the rendezvous gives up waiting for nodes (docs/ssh.md).
constexpr Duration kBelowMinBound = std::chrono::seconds(60);
// An agent that has not reached the rendezvous this long after its start is
// stuck before it (a remote shell or --rsh command waiting for a password):
// it is dropped and its host fails pre-flight. The agent's own connect gives
// up after 30 s with its own message, so this only catches hangs.
constexpr Duration kJoinBound = std::chrono::seconds(45);

// drun's own lines go through the hosts' console (ssh_console.h), after
// ending any host's open line.
void SayLocked(absl::string_view message) { ConsoleHub::Get().Text(DrunLine(message)); }

std::string SelfExe() { return DrunPath(); }

// One line of an agent's output, held until the agent has joined the job.
struct HeldLine {
  int stream = 2;
  std::string text;
};

// Events from the hosts' threads to the launcher's loop: an agent ended, or
// could not be started.
struct Event {
  int host = -1;
  int instance = 0;
  RemoteProcess::Outcome outcome;
  std::string start_error;   // the agent could not be started at all
  bool unreachable = false;  // with start_error: the host did not answer (it may be off)
  std::vector<HeldLine> held;  // what an agent that never joined printed
  std::unique_ptr<SshConnection> conn;  // handed back for the next start
};

// Agents' ends, from the hosts' threads to the launcher's loop.
using EventQueue = Mailbox<Event>;

// An agent's streams, for the console. Agents' own messages get the host's
// name; their end-of-job summaries are not printed (launcher_reports_end:
// the launcher prints the job's end once). Until the job has started with
// this host in it (Release, from the launcher's loop), whole lines are held:
// a host whose agent fails its checks gets one line from the launcher
// (StartFailureLine), and a job refused before it started says nothing more.
// Nothing held is ever dropped: worker output (stdout) exists only once a
// round has started, so its first byte releases the host at once, even before
// the launcher's loop has seen the job start; so does a held line beyond
// kMaxHeld. Once released, bytes reach the console as they come, partial
// lines too (ssh_console.h).
class HostOutput {
 public:
  explicit HostOutput(std::string host) : host_(std::move(host)) {}
  // From the host's thread.
  void Feed(int stream, const char* data, size_t n) {
    MutexLock lock(&mu_);
    if (!released_ && stream == 1) ReleaseLocked();
    if (released_) return Stream(stream).Feed(absl::string_view(data, n));
    // The splitters call back synchronously, under the lock held here.
    auto emit = [&](absl::string_view line) {
      mu_.AssertHeld();
      Hold(stream, line);
    };
    (stream == 1 ? out_ : err_).Feed(absl::string_view(data, n), emit);
    if (held_.size() > kMaxHeld) ReleaseLocked();  // more than checks print: the job runs
  }
  // The agent ended: what it left unfinished goes out (or is held).
  void Flush() {
    MutexLock lock(&mu_);
    if (released_) {
      streams_[0].reset();
      streams_[1].reset();
      return;
    }
    out_.Flush([&](absl::string_view line) {
      mu_.AssertHeld();
      Hold(1, line);
    });
    err_.Flush([&](absl::string_view line) {
      mu_.AssertHeld();
      Hold(2, line);
    });
  }
  // From the launcher's loop: the held lines go out, and every byte after them.
  void Release() {
    MutexLock lock(&mu_);
    ReleaseLocked();
  }
  // The lines still held (an agent that never joined, or a job never started).
  std::vector<HeldLine> TakeHeld() {
    MutexLock lock(&mu_);
    return std::exchange(held_, {});
  }

 private:
  static constexpr size_t kMaxHeld = 50;
  void ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (released_) return;
    released_ = true;
    for (const HeldLine& l : held_) Stream(l.stream).Feed(absl::StrCat(l.text, "\n"));
    held_.clear();
    // A partial line the splitters still hold goes on as one.
    out_.Flush([&](absl::string_view rest) {
      mu_.AssertHeld();
      Stream(1).Feed(rest);
    });
    err_.Flush([&](absl::string_view rest) {
      mu_.AssertHeld();
      Stream(2).Feed(rest);
    });
  }
  void Hold(int stream, absl::string_view line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    held_.push_back({stream, std::string(line)});
  }
  HostStream& Stream(int stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::unique_ptr<HostStream>& s = streams_[stream == 1 ? 0 : 1];
    if (!s) s = std::make_unique<HostStream>(&ConsoleHub::Get(), stream, host_);
    return *s;
  }
  const std::string host_;
  Mutex mu_;
  LineSplitter out_ ABSL_GUARDED_BY(mu_), err_ ABSL_GUARDED_BY(mu_);
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<HeldLine> held_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<HostStream> streams_[2] ABSL_GUARDED_BY(mu_);
};

// What the launcher's loop and a host's thread share about the running agent.
struct Control {
  // first_input: the notices the agent gets first (stdin's end, once it ended).
  Control(std::string host, std::string first_input)
      : output(std::make_shared<HostOutput>(std::move(host))), early_input(std::move(first_input)) {}
  Mutex mu;
  std::shared_ptr<RemoteProcess> proc ABSL_GUARDED_BY(mu);
  Ending level ABSL_GUARDED_BY(mu) = Ending::kNone;
  const std::shared_ptr<HostOutput> output;
  // The launcher's stdin relayed before the agent's process exists (typed
  // ahead of the start); bounded, and whole notices only.
  static constexpr size_t kMaxEarlyInput = 1 << 20;
  std::string early_input ABSL_GUARDED_BY(mu);
  // Relays notices of the launcher's stdin to the agent, in order. `last`:
  // they hold stdin's end, kept even past the bound.
  void Input(const std::string& notices, bool last) {
    MutexLock lock(&mu);
    if (proc) return proc->Send(notices);
    if (early_input.size() + notices.size() <= kMaxEarlyInput || last) early_input += notices;
  }
  // Forwards a signal to the agent (its lifeline's notice). A stop signal
  // stops its workers with it, and an agent not started yet is not started
  // at all; SIGUSR1/SIGUSR2 reach its workers.
  void Forward(int sig) {
    std::shared_ptr<RemoteProcess> p;
    {
      MutexLock lock(&mu);
      p = proc;
      if (!p && !IsUserSignal(sig)) level = std::max(level, Ending::kStop);
    }
    if (p) p->Signal(sig);
  }
  void Request(Ending l) {
    std::shared_ptr<RemoteProcess> p;
    {
      MutexLock lock(&mu);
      if (l <= level) return;
      level = l;
      p = proc;
    }
    if (p) (l == Ending::kAbort ? p->Abort() : p->Stop());
  }
  // Publishes the process; false when a stop came first (then it is stopped).
  void Publish(std::shared_ptr<RemoteProcess> p) {
    Ending l;
    {
      MutexLock lock(&mu);
      proc = p;
      l = level;
      if (!early_input.empty()) p->Send(std::exchange(early_input, {}));
    }
    if (l == Ending::kAbort) p->Abort();
    else if (l == Ending::kStop) p->Stop();
  }
  Ending Level() {
    MutexLock lock(&mu);
    return level;
  }
  // The process ended: nothing left to stop.
  void Clear() {
    MutexLock lock(&mu);
    proc.reset();
  }
};

// Everything a host's thread needs to start one agent.
struct LaunchInfo {
  int host = -1;
  int instance = 0;
  HostEntry entry;
  v1::JobSpec spec;
  std::string token;
  int port = 0;
  std::string dial_override;  // --rdzv-endpoint's host
  std::string drun;           // remote drun path
  std::vector<std::string> rsh;  // empty: libssh
  SshTarget target;
};

v1::AgentLaunch LaunchFor(const LaunchInfo& info) {
  v1::AgentLaunch launch;
  *launch.mutable_spec() = info.spec;
  launch.set_token(info.token);
  launch.set_hostname(info.entry.host);
  launch.set_launcher_reports_end(true);
  // Announce() says when the job starts: the agents' "waiting: K of N nodes
  // joined" lines, held until then, would follow it stale.
  launch.set_launcher_announces_start(true);
  // The agent checks the version, the working directory and the script
  // itself (CheckLaunchHere): one remote command per host is all a start costs.
  launch.set_launcher_version(VersionWords());
  return launch;
}

// `drun agent` over the host's ssh connection, opened first when there is none.
std::shared_ptr<RemoteProcess> StartOverSsh(const LaunchInfo& info,
                                            std::unique_ptr<SshConnection>* conn,
                                            Control* control, Event* ev) {
  if (!*conn || !(*conn)->connected()) {
    conn->reset();
    auto c = SshConnection::Connect(info.target);
    if (!c.ok()) {
      ev->start_error = std::string(c.status().message());
      ev->unreachable = absl::IsUnavailable(c.status());
      return nullptr;
    }
    *conn = std::move(*c);
  }
  std::string dial = info.dial_override.empty() ? (*conn)->local_address() : info.dial_override;
  if (dial.empty()) {
    // Not a TCP socket (ProxyCommand/ProxyJump): the route to the host.
    auto ip = ResolveHost(info.entry.host);
    if (ip.ok()) dial = RouteSourceAddress(*ip, 22);
  }
  v1::AgentLaunch launch = LaunchFor(info);
  launch.set_rdzv_target(Endpoint{dial, info.port}.ToString());
  launch.set_local_addr((*conn)->peer_address());
  if (control->Level() != Ending::kNone) return nullptr;
  auto p = StartSshExec(conn->get(), absl::StrCat(ShellQuote(info.drun), " agent"),
                        EncodeAgentLaunch(launch));
  if (!p.ok()) {
    ev->start_error = std::string(p.status().message());
    return nullptr;
  }
  return std::move(*p);
}

// `CMD HOST drun agent` as a local child (--rsh). The host dials back the
// source address of this machine's route to it, unless --rdzv-endpoint says.
std::shared_ptr<RemoteProcess> StartOverRsh(const LaunchInfo& info, Control* control, Event* ev) {
  std::string dial = info.dial_override;
  if (dial.empty()) {
    auto ip = ResolveHost(info.entry.host);
    if (ip.ok()) dial = RouteSourceAddress(*ip, 22);
    if (dial.empty()) {
      ev->start_error = absl::StrCat(
          "cannot tell which address this host reaches this machine at (",
          ip.ok() ? "no route to it" : ip.status().message(),
          "); pass --rdzv-endpoint THIS_MACHINE:PORT");
      return nullptr;
    }
  }
  v1::AgentLaunch launch = LaunchFor(info);
  launch.set_rdzv_target(Endpoint{dial, info.port}.ToString());
  std::vector<std::string> argv = info.rsh;
  argv.push_back(HostLabel(info.entry));
  argv.push_back(info.drun);
  argv.push_back("agent");
  if (control->Level() != Ending::kNone) return nullptr;
  auto p = StartRshProcess(argv, EncodeAgentLaunch(launch));
  if (!p.ok()) {
    ev->start_error = std::string(p.status().message());
    return nullptr;
  }
  return std::move(*p);
}

// A host's thread: connects if needed, starts `drun agent`, pumps its output
// until it ends, and reports the end.
void RunAgent(LaunchInfo info, std::unique_ptr<SshConnection> conn,
              std::shared_ptr<Control> control, std::shared_ptr<EventQueue> queue) {
  Event ev;
  ev.host = info.host;
  ev.instance = info.instance;
  std::shared_ptr<RemoteProcess> proc = info.rsh.empty()
                                            ? StartOverSsh(info, &conn, control.get(), &ev)
                                            : StartOverRsh(info, control.get(), &ev);
  if (proc) {
    control->Publish(proc);
    HostOutput& output = *control->output;
    ev.outcome = proc->Run([&](int stream, const char* d, size_t n) { output.Feed(stream, d, n); });
    output.Flush();
    ev.held = output.TakeHeld();
    control->Clear();
  }
  proc.reset();  // closes the channel before the connection is handed back
  if (conn && conn->connected()) ev.conn = std::move(conn);
  queue->Post(std::move(ev));
}

std::string DescribeEnd(const Event& e) {
  if (!e.start_error.empty()) return absl::StrCat("the agent could not be started: ", e.start_error);
  const auto& o = e.outcome;
  if (!o.error.empty()) return o.error;
  if (!o.exit_signal.empty()) return absl::StrCat("the agent was killed by SIG", o.exit_signal);
  if (o.exit_status >= 0) return absl::StrCat("the agent exited with status ", o.exit_status);
  return "the agent's channel closed";
}

// One line for a host whose agent never joined the job: why it could not be
// started, or what ended it. The agent's own message comes first (its checks:
// version, working directory, script); then the remote shell's exit codes
// for a drun that is not there (127) or cannot run (126), and --rsh's 255.
std::string StartFailureLine(const Event& e, const LaunchInfo& info) {
  if (!e.start_error.empty()) return e.start_error;
  std::string last, own;
  for (const HeldLine& l : e.held) {
    if (l.stream != 2) continue;
    last = l.text.substr(0, 200);
    if (absl::StartsWith(l.text, "drun: ")) own = l.text.substr(6, 300);
  }
  if (!own.empty()) return own;
  const int status = e.outcome.exit_status;
  if (!info.rsh.empty() && status == 255) {
    return absl::StrCat("cannot reach it with --rsh (exit 255): ", last);
  }
  if (status == 127) {
    return absl::StrCat("drun is not at ", info.drun,
                        " there; install it at the same path as here, or pass --remote-drun PATH");
  }
  if (status == 126) {
    return absl::StrCat(info.drun, " is not executable there (", last,
                        "); fix its permissions or pass --remote-drun PATH");
  }
  return absl::StrCat(DescribeEnd(e), " before it joined the job", last.empty() ? "" : ": ", last);
}


class SshLauncher {
 public:
  SshLauncher(const CommandLine& cl, const std::map<std::string, std::string>& env)
      : cl_(cl), env_(env), queue_(std::make_shared<EventQueue>()) {}
  // Every thread this launcher started is joined here (none is detached): a
  // stop is requested first, so the ones still running end promptly.
  ~SshLauncher();

  int Run(const v1::JobSpec& spec_in, std::string token);

 private:
  // kRetrying: the host did not answer (it may be switched off); it is tried
  // again at retry_at and joins the job when it answers.
  enum class State { kIdle, kRunning, kSettling, kRetrying, kExcluded, kDone };
  struct Host {
    HostPlan plan;
    LaunchInfo info;
    std::unique_ptr<SshConnection> conn;
    std::shared_ptr<Control> control;
    State state = State::kIdle;
    int instance = 0;
    int failures = 0;
    bool joined = false;        // the running agent reached the rendezvous
    int joins = 0;              // agents of this host that reached it (each has logs)
    bool lost_counted = false;  // the live agent was reported lost
    bool alive = false;         // an agent thread of this host has not ended
    bool said_down = false;     // "trying it again" was said; "answers again" is due
    TimePoint settle_deadline;
    TimePoint retry_at;
    TimePoint join_by;          // kJoinBound after the start
    bool join_overdue = false;  // dropped for not joining in time
    std::string last_failure;
  };
  // What --rdzv-endpoint asks for: the address agents dial, and the port.
  struct Rendezvous {
    std::string dial_override;
    int port = 0;
  };

  // The steps of Run, in order.
  absl::StatusOr<Rendezvous> PlanJob(const v1::JobSpec& spec_in, std::vector<std::string>* rsh);
  void AddHosts(const std::string& token, const Rendezvous& rdzv, std::vector<std::string> rsh);
  void AnnounceAndStart(const v1::JobSpec& spec_in, int port);
  void Announce() const;
  void Supervise(int sig_fd, RendezvousServer* server, double grace_s);
  absl::Status MakeRunDir(v1::JobSpec* spec);
  void CollectHostLogs(int sig_fd);
  // After Supervise: the rendezvous stops, every host's logs are collected,
  // and the end's report is printed; returns drun's exit code.
  int End(int sig_fd, RendezvousServer* server);
  HostLogCopy::Starter TarStarter(Host& h);
  int ExitCode() const;

  // The supervision loop's parts.
  std::optional<TimePoint> Due(TimePoint now);
  std::optional<TimePoint> DeadlineOf(const Host& h) const;
  void OnDue(Host& h);
  void OnStopSignal(int sig, Duration end_bound);
  void DrainServer(RendezvousServer* server, Duration end_bound);

  void Start(Host& h);
  void Fail(Host& h, const std::string& why);
  void Settle(Host& h);
  void OnEnded(Event e);
  void OnArrived(const std::string& host);
  void OnStartFailed(Host& h, const Event& e);
  void Retry(Host& h, const std::string& why);
  void CheckStart();
  void OnLost(const std::string& host);
  void CheckViable();
  // The running job has fewer than MIN hosts in it: from when, and its end.
  void WatchBelowMin();
  void OnBelowMinDue();
  // A stop signal to every agent (they stop their workers with it).
  void ForwardAll(int sig);
  void StopAll(Ending level);
  void RelayStdin();
  bool AllEnded() const;
  Host* FindHost(const std::string& name);

  const CommandLine& cl_;
  const std::map<std::string, std::string>& env_;
  std::shared_ptr<EventQueue> queue_;
  SshPlan plan_;
  std::vector<Host> hosts_;
  std::vector<std::thread> threads_;  // agents' and pre-flight checks', joined at the end
  bool quiet_ = false;
  int port_ = 0;          // the rendezvous'
  bool started_ = false;  // MIN hosts' agents joined: the job runs
  bool refused_ = false;  // too few hosts passed their checks: nothing ran
  bool finished_ = false;
  Ending stop_level_ = Ending::kNone;
  int stop_signal_ = 0;
  int exit_code_ = 0;
  std::optional<v1::Finish> finish_;
  std::optional<TimePoint> end_deadline_;
  std::optional<TimePoint> below_min_deadline_;  // WatchBelowMin
  Duration below_min_bound_ = kBelowMinBound;
  std::optional<JobControl> control_;  // `drun stacks` on this machine
  std::optional<LauncherReport> report_;  // --summary, --report: every host's ranks
  double keepalive_timeout_s_ = 2;
  StdinRelay stdin_{false};  // this process's stdin, for the agents (--stdin)
  std::string run_dir_;  // <log_dir>/<run dir>, absolute, made here: where every host's logs end up
};

SshLauncher::~SshLauncher() {
  StopAll(Ending::kAbort);
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

SshLauncher::Host* SshLauncher::FindHost(const std::string& name) {
  for (Host& h : hosts_) {
    if (h.plan.entry.host == name) return &h;
  }
  return nullptr;
}

void SshLauncher::Start(Host& h) {
  h.instance++;
  h.state = State::kRunning;
  h.alive = true;
  h.lost_counted = false;
  h.joined = false;
  h.join_overdue = false;
  h.join_by = Clock::now() + kJoinBound;
  h.control = std::make_shared<Control>(h.plan.entry.host, stdin_.ForNewAgent());
  LaunchInfo info = h.info;
  info.instance = h.instance;
  threads_.emplace_back(RunAgent, std::move(info), std::move(h.conn), h.control, queue_);
}

void SshLauncher::Fail(Host& h, const std::string& why) {
  h.failures++;
  h.last_failure = why;
  if (h.failures >= 2) {
    h.state = State::kExcluded;
    SayLocked(absl::StrCat(h.plan.entry.host, ": ", why, "; its agent failed twice, so this job does not "
                     "use the host again"));
  } else {
    SayLocked(absl::StrCat(h.plan.entry.host, ": ", why, "; starting a new agent there"));
    Start(h);
  }
  CheckViable();
}

void SshLauncher::Settle(Host& h) {
  // The ended agent's loss has been seen by the rendezvous (or could not be
  // any more): it is now safe to start another agent under the same name.
  if (h.state != State::kSettling) return;
  if (finished_ || stop_level_ != Ending::kNone) {
    h.state = State::kDone;
    return;
  }
  Fail(h, h.last_failure);
}

void SshLauncher::OnEnded(Event e) {
  if (e.host < 0 || e.host >= static_cast<int>(hosts_.size())) return;
  Host& h = hosts_[e.host];
  if (e.instance != h.instance) return;
  h.alive = false;
  h.conn = std::move(e.conn);
  if (h.state == State::kExcluded) return;
  if (finished_ || stop_level_ != Ending::kNone) {
    h.state = State::kDone;
    if (finished_ && !e.start_error.empty() && !e.unreachable) {
      SayLocked(absl::StrCat(h.plan.entry.host, ": ", DescribeEnd(e)));
    }
    return;
  }
  // Never reached the rendezvous: nothing else will report it.
  if (!h.joined) return OnStartFailed(h, e);
  if (h.lost_counted) {
    // Already counted when the rendezvous reported it lost. The connection may
    // be as dead as the agent (a cut link): the next agent gets a fresh one.
    h.conn.reset();
    if (h.state == State::kRunning) Start(h);
    return;
  }
  h.last_failure = DescribeEnd(e);
  h.state = State::kSettling;
  h.settle_deadline = Clock::now() + SecondsToDuration(keepalive_timeout_s_ + 1);
  CheckViable();
}

// An agent that never joined. Before the job started: the host's pre-flight
// failed (one line); a host that did not answer is tried again once the job
// runs. After: a host that does not answer is tried again every
// kRetryInterval; any other failure counts against the host as an agent's end.
void SshLauncher::OnStartFailed(Host& h, const Event& e) {
  const std::string why =
      h.join_overdue ? absl::StrCat("its agent did not reach the rendezvous within ",
                                    DurationToSeconds(kJoinBound), " s (a prompt for a password? "
                                    "the remote command must not need a terminal)")
                     : StartFailureLine(e, h.info);
  const bool unreachable =
      e.unreachable || (!h.info.rsh.empty() && e.outcome.exit_status == 255);
  if (started_) {
    if (unreachable) return Retry(h, why);
    return Fail(h, why);
  }
  SayLocked(absl::StrCat(HostLabel(h.plan.entry), ": ", why));
  h.last_failure = why;
  h.state = unreachable ? State::kRetrying : State::kExcluded;
  h.retry_at = Clock::now() + kRetryInterval;
  CheckStart();
}

void SshLauncher::Retry(Host& h, const std::string& why) {
  h.state = State::kRetrying;
  h.last_failure = why;
  h.retry_at = Clock::now() + kRetryInterval;
  if (h.said_down) return;  // said once; tried again quietly
  h.said_down = true;
  SayLocked(absl::StrCat(HostLabel(h.plan.entry), ": ", why, "; trying it again every ",
                         DurationToSeconds(kRetryInterval), " s: it joins the job when it answers"));
}

// Before the job has started: it starts (for the launcher) once MIN hosts'
// agents have joined, and is refused, naming every failing host, once every
// host has its verdict and fewer than MIN can join. A static job with no
// spare needs every host; hosts beyond MIN that fail do not hold the job up.
void SshLauncher::CheckStart() {
  if (started_ || refused_ || finished_ || stop_level_ != Ending::kNone) return;
  int joined = 0, failed = 0;
  for (const Host& h : hosts_) {
    joined += h.joined ? 1 : 0;
    failed += (h.state == State::kExcluded || h.state == State::kRetrying) ? 1 : 0;
  }
  const int n = static_cast<int>(hosts_.size());
  if (joined < plan_.min_nodes) {
    if (n - failed >= plan_.min_nodes || joined + failed < n) return;  // may still start
    SayLocked(absl::StrCat("pre-flight failed on ", failed, " of ", n, " host", n == 1 ? "" : "s",
                           "; nothing was started"));
    refused_ = true;
    exit_code_ = 1;
    StopAll(Ending::kStop);
    return;
  }
  started_ = true;
  Announce();
  for (Host& h : hosts_) {
    if (h.joined) h.control->output->Release();
    if (h.state != State::kRetrying || h.said_down) continue;
    h.said_down = true;
    SayLocked(absl::StrCat(HostLabel(h.plan.entry), ": the job starts without it; trying it "
                           "again every ", DurationToSeconds(kRetryInterval),
                           " s: it joins the job when it answers"));
  }
}

void SshLauncher::OnArrived(const std::string& name) {
  Host* h = FindHost(name);
  if (!h || h->state != State::kRunning || h->joined) return;
  h->joined = true;
  h->joins++;
  if (h->said_down) {
    h->said_down = false;
    SayLocked(absl::StrCat(name, ": answers again; its agent joined the job"));
  }
  if (started_) {
    h->control->output->Release();
  } else {
    CheckStart();
  }
  WatchBelowMin();
}

void SshLauncher::OnLost(const std::string& name) {
  if (finished_ || stop_level_ != Ending::kNone) return;
  Host* h = FindHost(name);
  if (!h) return;
  if (h->state == State::kSettling) {
    Settle(*h);
  } else if (h->state == State::kRunning && !h->lost_counted) {
    // Its agent is alive as far as ssh knows, but the rendezvous lost it
    // (a cut link, a hung agent): drop it; a fresh one starts once it ended.
    h->lost_counted = true;
    h->failures++;
    h->last_failure = "the rendezvous lost its agent";
    if (h->failures >= 2) {
      h->state = State::kExcluded;
      SayLocked(absl::StrCat(name, ": the rendezvous lost its agent; its agent failed twice, so this "
                       "job does not use the host again"));
    } else {
      SayLocked(absl::StrCat(name, ": the rendezvous lost its agent; starting a new agent there"));
    }
    h->control->Request(Ending::kAbort);
  }
  CheckViable();
}

void SshLauncher::CheckViable() {
  if (finished_ || stop_level_ != Ending::kNone) return;
  int usable = 0;
  std::vector<std::string> gone;
  for (const Host& h : hosts_) {
    if (h.state == State::kExcluded) {
      gone.push_back(absl::StrCat(h.plan.entry.host, " (", h.last_failure, ")"));
    } else {
      usable++;
    }
  }
  if (usable >= plan_.min_nodes) return WatchBelowMin();
  SayLocked(absl::StrCat("job failed: only ", usable, " usable host", usable == 1 ? "" : "s",
                   " left and the job needs at least ", plan_.min_nodes,
                   "; not usable: ", absl::StrJoin(gone, ", ")));
  exit_code_ = 1;
  // The survivors' workers stop as on the user's Ctrl-C: SIGTERM, then
  // SIGKILL after --shutdown-timeout (not a lost launcher's SIGHUP).
  ForwardAll(SIGTERM);
}

// A host that does not answer is tried again and still counts as usable, but a
// job cannot run on it: when fewer than MIN hosts have an agent in the job for
// below_min_bound_, the job fails naming the others.
void SshLauncher::WatchBelowMin() {
  if (!started_ || finished_ || stop_level_ != Ending::kNone) return;
  int in_job = 0;
  for (const Host& h : hosts_) in_job += h.state == State::kRunning && h.joined && !h.lost_counted;
  if (in_job >= plan_.min_nodes) {
    below_min_deadline_.reset();
    return;
  }
  // Said only if it comes to failing: an agent replaced in a few seconds is
  // no news (the hosts that do not answer have their own lines).
  if (!below_min_deadline_) below_min_deadline_ = Clock::now() + below_min_bound_;
}

void SshLauncher::OnBelowMinDue() {
  below_min_deadline_.reset();
  if (finished_ || stop_level_ != Ending::kNone) return;
  int in_job = 0;
  std::vector<std::string> out;
  for (const Host& h : hosts_) {
    if (h.state == State::kRunning && h.joined && !h.lost_counted) {
      ++in_job;
    } else {
      out.push_back(absl::StrCat(h.plan.entry.host, " (",
                                 h.last_failure.empty() ? "not in the job" : h.last_failure, ")"));
    }
  }
  if (in_job >= plan_.min_nodes) return;
  SayLocked(absl::StrCat("job failed: only ", in_job, " host", in_job == 1 ? "" : "s",
                         " in the job for ", DurationToSeconds(below_min_bound_),
                         " s and it needs at least ", plan_.min_nodes, "; not in it: ",
                         absl::StrJoin(out, ", ")));
  exit_code_ = 1;
  ForwardAll(SIGTERM);
}

void SshLauncher::ForwardAll(int sig) {
  stop_level_ = std::max(stop_level_, Ending::kStop);
  for (Host& h : hosts_) {
    if (h.control) h.control->Forward(sig);
  }
}

void SshLauncher::StopAll(Ending level) {
  stop_level_ = std::max(stop_level_, level);
  for (Host& h : hosts_) {
    if (h.control) h.control->Request(level);
  }
}

// What this process reads on its stdin goes to every agent; each hands it to
// its workers --stdin names (all of them get the end).
void SshLauncher::RelayStdin() {
  const std::string notices = stdin_.Read();
  if (notices.empty()) return;
  for (Host& h : hosts_) {
    if (h.control) h.control->Input(notices, stdin_.ended());
  }
}

bool SshLauncher::AllEnded() const {
  for (const Host& h : hosts_) {
    if (h.alive) return false;
  }
  return true;
}

absl::StatusOr<SshLauncher::Rendezvous> SshLauncher::PlanJob(const v1::JobSpec& spec_in,
                                                              std::vector<std::string>* rsh) {
  auto hosts = LoadHosts(cl_);
  if (!hosts.ok()) return hosts.status();
  auto plan = PlanSshJob(cl_, spec_in, *hosts, AlwaysForwardedEnv(env_), env_);
  if (!plan.ok()) return plan.status();
  plan_ = std::move(*plan);
  if (!cl_.rsh.empty()) {
    auto split = SplitRshCommand(cl_.rsh);
    if (!split.ok()) return split.status();
    *rsh = std::move(*split);
  }
  Rendezvous rdzv;
  if (!spec_in.rdzv_endpoint().empty()) {
    auto ep = ParseEndpoint(spec_in.rdzv_endpoint(), /*default_port=*/0);  // resolved: names its port (cli.h)
    if (!ep.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--rdzv-endpoint: ", ep.status().message()));
    }
    rdzv.dial_override = ep->host;
    rdzv.port = ep->port;
  }
  return rdzv;
}

void SshLauncher::AddHosts(const std::string& token, const Rendezvous& rdzv,
                           std::vector<std::string> rsh) {
  const std::string drun = cl_.remote_drun.empty() ? SelfExe() : cl_.remote_drun;
  for (size_t i = 0; i < plan_.hosts.size(); ++i) {
    Host h;
    h.plan = plan_.hosts[i];
    LaunchInfo& info = h.info;
    info.host = static_cast<int>(i);
    info.entry = h.plan.entry;
    info.spec = h.plan.spec;
    info.token = token;
    info.dial_override = rdzv.dial_override;
    info.drun = drun;
    info.rsh = rsh;
    info.target.host = h.plan.entry.host;
    info.target.user = h.plan.entry.user;
    info.target.accept_new = cl_.ssh_accept_new;
    hosts_.push_back(std::move(h));
  }
}

// Every host at once: one connection and one remote command each (the agent
// makes the host's checks itself).
void SshLauncher::AnnounceAndStart(const v1::JobSpec& spec_in, int port) {
  quiet_ = spec_in.quiet();
  port_ = port;
  for (Host& h : hosts_) Start(h);
}

// Said once MIN hosts' agents have joined: which ones, and that the rest are
// spares (the rendezvous' first-come decision; each spare's agent says so).
void SshLauncher::Announce() const {
  if (quiet_) return;
  std::vector<std::string> names;
  for (const Host& h : hosts_) {
    if (h.joined) names.push_back(h.plan.entry.host);
  }
  const int n = static_cast<int>(names.size());
  SayLocked(absl::StrCat(
      "agents joined on ", n, " of ", hosts_.size(), " host", hosts_.size() == 1 ? "" : "s", " (",
      absl::StrJoin(names, ", "), ")",
      plan_.spares > 0 ? absl::StrCat("; the job runs on ", hosts_.size() - plan_.spares,
                                       ", the others wait as spares")
                       : "",
      "; rendezvous on port ", port_));
}

// The one deadline a host waits for, if any: its settling; its next try
// (once the job runs); the bound for its agent to join.
std::optional<TimePoint> SshLauncher::DeadlineOf(const Host& h) const {
  const bool going = !finished_ && stop_level_ == Ending::kNone;
  switch (h.state) {
    case State::kSettling:
      return h.settle_deadline;
    case State::kRetrying:
      if (going && started_) return h.retry_at;
      return std::nullopt;
    case State::kRunning:
      if (going && h.alive && !h.joined && !h.join_overdue) return h.join_by;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

void SshLauncher::OnDue(Host& h) {
  switch (h.state) {
    case State::kSettling:
      Settle(h);
      break;
    case State::kRetrying:
      Start(h);
      break;
    case State::kRunning:  // stuck before the rendezvous: its end fails its pre-flight
      h.join_overdue = true;
      h.control->Request(Ending::kAbort);
      break;
    default:
      break;
  }
}

// Acts for the hosts whose deadline has come; the earliest one still to come.
std::optional<TimePoint> SshLauncher::Due(TimePoint now) {
  if (below_min_deadline_ && *below_min_deadline_ <= now) OnBelowMinDue();
  std::optional<TimePoint> next = below_min_deadline_;
  for (Host& h : hosts_) {
    const std::optional<TimePoint> at = DeadlineOf(h);
    if (!at) continue;
    if (*at <= now) {
      OnDue(h);
      continue;
    }
    if (!next || *at < *next) next = *at;
  }
  return next;
}

void SshLauncher::OnStopSignal(int sig, Duration end_bound) {
  if (stop_signal_ == 0 && !finished_) {
    stop_signal_ = sig;
    SayLocked(absl::StrCat("got ", SignalName(sig), ": stopping the agents on every host (",
                     "again to drop them at once)"));
    // Every agent stops its workers with this very signal and the grace.
    ForwardAll(sig);
    end_deadline_ = Clock::now() + end_bound;
  } else {
    SayLocked(absl::StrCat("got ", SignalName(sig), " again: dropping every connection"));
    if (stop_signal_ == 0) stop_signal_ = sig;
    // The second notice has the agents kill their workers; the drop follows it.
    ForwardAll(sig);
    StopAll(Ending::kAbort);
    end_deadline_ = Clock::now() + std::chrono::seconds(5);
  }
}

void SshLauncher::DrainServer(RendezvousServer* server, Duration end_bound) {
  while (auto ev = server->NextEvent()) {
    if (ev->kind == RendezvousServer::Event::kFinished) {
      if (!finished_) {
        finished_ = true;
        finish_ = ev->finish;
        if (!end_deadline_) end_deadline_ = Clock::now() + end_bound;
      }
    } else if (ev->kind == RendezvousServer::Event::kNodeLost) {
      OnLost(ev->host);
    } else if (ev->kind == RendezvousServer::Event::kNodeArrived) {
      OnArrived(ev->host);
    } else if (ev->kind == RendezvousServer::Event::kStacks && control_) {
      control_->OnStacks(*ev);
    } else if (ev->kind == RendezvousServer::Event::kReport && report_) {
      report_->Add(ev->report);
    }
  }
}

// Until the job is over and every agent has ended: signals, the rendezvous'
// events, the agents' ends, and the deadlines of settling hosts and of the end.
void SshLauncher::Supervise(int sig_fd, RendezvousServer* server, double grace_s) {
  const Duration end_bound = SecondsToDuration(grace_s + 15);
  ConsoleHub& console = ConsoleHub::Get();
  PollSet set;
  set.Add(sig_fd, POLLIN, [&](short) {
    DrainSignalFd(sig_fd, [&](int sig, const signalfd_siginfo&) {
      if (IsUserSignal(sig)) {
        for (Host& h : hosts_) {
          if (h.control) h.control->Forward(sig);
        }
      } else {
        OnStopSignal(sig, end_bound);
      }
    });
  });
  set.Add(server->event_fd(), POLLIN, [&](short) { DrainServer(server, end_bound); });
  set.Add(queue_->fd(), POLLIN, [&](short) {
    while (auto ev = queue_->Take()) OnEnded(std::move(*ev));
  });
  if (control_) set.Add(control_->fd(), POLLIN, [&](short) { control_->OnReadable(); });
  const PollSet::Id stdin_id = set.Add(stdin_.fd(), POLLIN, [&](short) { RelayStdin(); });
  // The console's wake-ups and its descriptors that are full only end the
  // wait: Tick() at the top of the loop writes.
  set.Add(console.wake_fd(), POLLIN, [](short) {});
  const PollSet::Id blocked_ids[2] = {set.Add(-1, POLLOUT, [](short) {}), set.Add(-1, POLLOUT, [](short) {})};
  for (;;) {
    if ((finished_ || stop_level_ != Ending::kNone) && AllEnded()) break;
    const TimePoint now = Clock::now();
    std::optional<TimePoint> deadline = Due(now);
    if (end_deadline_ && (!deadline || *end_deadline_ < *deadline)) deadline = end_deadline_;
    // The console's partial lines that are due; its descriptors that are full.
    if (std::optional<TimePoint> due = console.Tick(); due && (!deadline || *due < *deadline)) {
      deadline = due;
    }
    const std::vector<int> blocked = console.BlockedFds();
    for (size_t i = 0; i < 2; ++i) set.SetFd(blocked_ids[i], i < blocked.size() ? blocked[i] : -1);
    set.SetFd(stdin_id, stdin_.fd());  // -1 once it ended
    if (set.Poll(deadline) < 0) break;
    if (end_deadline_ && Clock::now() >= *end_deadline_) {
      if (stop_level_ == Ending::kAbort) break;  // dropped everything and still waiting: give up
      SayLocked("agents did not end in time; dropping their connections");
      StopAll(Ending::kAbort);
      end_deadline_ = Clock::now() + std::chrono::seconds(5);
    }
  }
}

// With logs, the run's directory is made here first (the one place every
// host's logs end up) and named for every host's agent (JobSpec.log_run_dir).
absl::Status SshLauncher::MakeRunDir(v1::JobSpec* spec) {
  if (absl::Status st = LogLayout::ClaimRun(spec); !st.ok()) return st;
  if (spec->log_run_dir().empty()) return absl::OkStatus();
  for (HostPlan& h : plan_.hosts) h.spec.set_log_run_dir(spec->log_run_dir());
  run_dir_ = LogLayout::RunDir(*spec);
  return absl::OkStatus();
}

// How a host's log directory is read: `tar -cf -` there, over its ssh
// connection (made again if the agent's was lost), or a second --rsh command.
HostLogCopy::Starter SshLauncher::TarStarter(Host& h) {
  if (!h.info.rsh.empty()) {
    std::vector<std::string> prefix = h.info.rsh;
    prefix.push_back(HostLabel(h.plan.entry));
    return [prefix](const std::string& dir) {
      std::vector<std::string> argv = prefix;
      for (std::string& a : TarArgv(dir)) argv.push_back(std::move(a));
      return StartRshProcess(argv, "");
    };
  }
  auto conn = std::make_shared<std::unique_ptr<SshConnection>>(std::move(h.conn));
  return [conn, target = h.info.target](const std::string& dir) -> absl::StatusOr<std::unique_ptr<RemoteProcess>> {
    if (!*conn || !(*conn)->connected()) {
      auto c = SshConnection::Connect(target);
      if (!c.ok()) return c.status();
      *conn = std::move(*c);
    }
    return StartSshExec(conn->get(), TarCommand(dir), "");
  };
}

// Every host's logs into run_dir_ (ssh_logs.h), each node's report saying
// where its logs are.
void SshLauncher::CollectHostLogs(int sig_fd) {
  if (run_dir_.empty() || !report_) return;
  LogCollection c;
  c.run_dir = run_dir_;
  c.dropped = stop_level_ == Ending::kAbort;  // a second stop signal, or agents that would not end
  c.quiet = quiet_;
  c.sig_fd = sig_fd;
  c.say = [](const std::string& line) { SayLocked(line); };
  std::vector<LogHost> hosts;
  for (Host& h : hosts_) hosts.push_back(LogHost{h.plan.entry.host, h.joins, TarStarter(h)});
  std::vector<std::string> stay;
  const int sig = CollectLogs(c, hosts, &report_->nodes(), &stay);
  report_->SetLogsNotCollected(std::move(stay));
  if (sig != 0 && stop_signal_ == 0) stop_signal_ = sig;
}

int SshLauncher::ExitCode() const {
  if (stop_signal_ != 0) return ExitCodeForSignal(stop_signal_);
  if (exit_code_ != 0) return exit_code_;
  if (finish_) return finish_->exit_code();
  return 1;
}

int SshLauncher::Run(const v1::JobSpec& spec_in, std::string token) {
  std::vector<std::string> rsh;
  v1::JobSpec spec = spec_in;
  auto rdzv = PlanJob(spec, &rsh);
  if (!rdzv.ok()) {
    SayLocked(rdzv.status().message());
    return 2;
  }
  if (absl::Status st = MakeRunDir(&spec); !st.ok()) {
    SayLocked(st.message());
    return kExitBadInput;
  }
  if (!spec.quiet() && !spec.log_run_dir().empty()) {
    SayLocked(LogLayout::RunDirLine(run_dir_, "every host's, collected here when the job ends"));
  }
  if (token.empty()) token = RandomHex(24);
  if (!cl_.report_path.empty()) {
    if (absl::Status st = CheckReportPath(cl_.report_path); !st.ok()) {
      SayLocked(st.message());
      return kExitBadInput;
    }
  }
  report_.emplace(spec_in.run_id(), cl_.summary, cl_.report_path, Clock::now());
  keepalive_timeout_s_ = spec_in.keepalive_timeout_s();
  if (spec_in.join_timeout_s() > 0) {
    below_min_bound_ = std::min(kBelowMinBound, SecondsToDuration(spec_in.join_timeout_s() / 2));
  }
  stdin_ = StdinRelay(spec_in.stdin_target().mode() != v1::JobSpec::StdinTarget::NONE);
  AddHosts(token, *rdzv, std::move(rsh));

  // The stop signals come through a signalfd; blocked before any thread.
  sigset_t stop_set;
  sigemptyset(&stop_set);
  for (int s : kHandledSignals) sigaddset(&stop_set, s);
  DropIgnoredSignals(&stop_set);  // nohup's SIGHUP stays ignored
  pthread_sigmask(SIG_BLOCK, &stop_set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  const UniqueFd sig_fd(signalfd(-1, &stop_set, SFD_CLOEXEC | SFD_NONBLOCK));
  // Forked before any thread: when this launcher is killed (-9), it removes
  // the `drun stacks` socket, so no job that is gone is ever listed.
  Guardian guardian = Guardian::Start();

  // The rendezvous first, on every interface (agents dial the address at
  // which their host sees this machine, IPv4 or IPv6).
  v1::JobSpec job_spec = spec;
  job_spec.set_min_nodes(plan_.min_nodes);
  job_spec.set_max_nodes(plan_.max_nodes);
  auto job = JobHost::Start(job_spec, token, AnyAddress(), rdzv->port, JobHost::Members::kOpen);
  if (!job.ok()) {
    SayLocked(absl::StrCat("cannot serve the rendezvous: ", job.status().message()));
    return 1;
  }
  RendezvousServer* server = (*job)->server();
  for (Host& h : hosts_) h.info.port = (*job)->port();
  control_ = JobControl::Open(env_, spec_in.run_id(), server);
  if (control_) guardian.RemoveOnDeath(control_->path());
  AnnounceAndStart(spec_in, (*job)->port());

  Supervise(sig_fd.get(), server, spec_in.shutdown_timeout_s());
  const int code = End(sig_fd.get(), server);
  guardian.Release();
  return code;
}

int SshLauncher::End(int sig_fd, RendezvousServer* server) {
  server->Shutdown(std::chrono::seconds(1));
  ConsoleHub::Get().Drain();  // every host's output before the end's report
  if (refused_) {
    if (!run_dir_.empty()) rmdir(run_dir_.c_str());  // nothing ran: empty here
    return exit_code_;  // each failing host had its line
  }
  CollectHostLogs(sig_fd);
  for (Host& h : hosts_) h.conn.reset();
  ConsoleHub::Get().Drain();
  // The table of every host's ranks first, the root cause last.
  const int code = ExitCode();
  report_->SetRefusedConnections(server->refused_connections());
  report_->End(code, finish_ ? &*finish_ : nullptr, Clock::now());
  if (stop_signal_ == 0 && exit_code_ == 0 && finish_) JobHost::Report(*finish_);
  return code;
}

}  // namespace

int RunSshLauncher(const CommandLine& cl, const v1::JobSpec& spec, const std::string& token,
                   const std::map<std::string, std::string>& env) {
  int code;
  {
    SshLauncher launcher(cl, env);
    code = launcher.Run(spec, token);
  }
  ConsoleHub::Get().Drain();
  return code;
}

}  // namespace drun

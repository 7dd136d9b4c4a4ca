#include "launcher/ssh/ssh_launcher.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/output.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/event_loop.h"
#include "launcher/job_control.h"
#include "launcher/job_host.h"
#include "launcher/ssh/ssh_plan.h"
#include "launcher/ssh/ssh_rsh.h"
#include "launcher/ssh/ssh_session.h"
#include "rendezvous/base/clock.h"
#include "rendezvous/base/random.h"
#include "rendezvous/base/signal_name.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/exit_code.h"

namespace drun {

namespace {

// Taken through a signalfd: the stop signals, and SIGUSR1/SIGUSR2, which the
// workers get too (a checkpoint request) without stopping anything.
constexpr int kHandledSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
bool IsUserSignal(int sig) { return sig == SIGUSR1 || sig == SIGUSR2; }
constexpr int kCheckTimeoutMs = 30000;

// Whole lines from several threads to this process's stdout/stderr, one
// write per line so lines of different hosts never mix.
// g_console_mu serialises the writes themselves (it guards no data).
std::mutex g_console_mu;
void ConsoleLine(int fd, absl::string_view line) {
  std::string out(line);
  out += '\n';
  std::lock_guard<std::mutex> lock(g_console_mu);
  WriteAll(fd, out);
}
// The hosts' threads share the console: drun's own lines go through it too.
void SayLocked(absl::string_view message) { ConsoleLine(2, absl::StripSuffix(DrunLine(message), "\n")); }

std::string FirstLine(absl::string_view text) {
  std::string line(text.substr(0, text.find('\n')));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line.substr(0, 200);
}

std::string LastLine(absl::string_view text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  return lines.empty() ? "" : lines.back().substr(0, 200);
}

std::string SelfExe() { return DrunPath(); }

// "drun 0.1.0": what must match on every host.
std::string VersionWords(absl::string_view version_text) {
  std::vector<std::string> words = absl::StrSplit(FirstLine(version_text), ' ', absl::SkipEmpty());
  if (words.size() > 2) words.resize(2);
  return absl::StrJoin(words, " ");
}

// Events from the hosts' threads to the launcher's loop.
struct Event {
  enum Kind { kEnded } kind = kEnded;
  int host = -1;
  int instance = 0;
  RemoteProcess::Outcome outcome;
  std::string start_error;  // the agent could not be started at all
  std::unique_ptr<SshConnection> conn;  // handed back for the next start
};

class EventQueue {
 public:
  EventQueue() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  int fd() const { return fd_.get(); }
  void Push(Event e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(e));
    }
    uint64_t one = 1;
    (void)!write(fd_.get(), &one, sizeof one);
  }
  std::optional<Event> Pop() {
    uint64_t v;
    while (read(fd_.get(), &v, sizeof v) > 0) {
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (events_.empty()) return std::nullopt;
    Event e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

 private:
  UniqueFd fd_;
  std::mutex mu_;
  std::deque<Event> events_ ABSL_GUARDED_BY(mu_);
};

// What the launcher's loop and a host's thread share about the running agent.
struct Control {
  std::mutex mu;
  std::shared_ptr<RemoteProcess> proc ABSL_GUARDED_BY(mu);
  int level ABSL_GUARDED_BY(mu) = 0;  // 1: stop (close stdin), 2: abort
  // Forwards a signal to the agent (its lifeline's notice). A stop signal
  // stops its workers with it, and an agent not started yet is not started
  // at all; SIGUSR1/SIGUSR2 reach its workers.
  void Forward(int sig) {
    std::shared_ptr<RemoteProcess> p;
    {
      std::lock_guard<std::mutex> lock(mu);
      p = proc;
      if (!p && !IsUserSignal(sig)) level = std::max(level, 1);
    }
    if (p) p->Signal(sig);
  }
  void Request(int l) {
    std::shared_ptr<RemoteProcess> p;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (l <= level) return;
      level = l;
      p = proc;
    }
    if (p) (l >= 2 ? p->Abort() : p->Stop());
  }
  // Publishes the process; false when a stop came first (then it is stopped).
  void Publish(std::shared_ptr<RemoteProcess> p) {
    int l;
    {
      std::lock_guard<std::mutex> lock(mu);
      proc = p;
      l = level;
    }
    if (l >= 2) p->Abort();
    else if (l >= 1) p->Stop();
  }
  int Level() {
    std::lock_guard<std::mutex> lock(mu);
    return level;
  }
  // The process ended: nothing left to stop.
  void Clear() {
    std::lock_guard<std::mutex> lock(mu);
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
  std::string rsh_dial;  // --rsh: the address this host reaches us at
};

// Splits an agent's streams into lines for the console. Agents' own
// messages get the host's name; their end-of-job summaries are dropped,
// since the launcher prints the job's end once.
class HostOutput {
 public:
  explicit HostOutput(std::string host) : host_(std::move(host)) {}
  void Feed(int stream, const char* data, size_t n) {
    auto emit = [&](absl::string_view line) { Line(stream, line); };
    (stream == 1 ? out_ : err_).Feed(absl::string_view(data, n), emit);
  }
  void Flush() {
    out_.Flush([&](absl::string_view line) { Line(1, line); });
    err_.Flush([&](absl::string_view line) { Line(2, line); });
  }

 private:
  // The agent's own lines get the host's name; the job's end is the
  // launcher's to print (AgentLaunch.launcher_reports_end), not the agent's.
  void Line(int stream, absl::string_view line) {
    if (stream == 2 && absl::StartsWith(line, "drun: ")) {
      ConsoleLine(2, absl::StrCat("drun: ", host_, ": ", line.substr(6)));
      return;
    }
    ConsoleLine(stream, line);
  }
  std::string host_;
  LineSplitter out_, err_;
};

// A host's thread: connects if needed, starts `drun agent`, pumps its output
// until it ends, and reports the end.
void RunAgent(LaunchInfo info, std::unique_ptr<SshConnection> conn,
              std::shared_ptr<Control> control, std::shared_ptr<EventQueue> queue) {
  Event ev;
  ev.host = info.host;
  ev.instance = info.instance;
  std::shared_ptr<RemoteProcess> proc;
  v1::AgentLaunch launch;
  *launch.mutable_spec() = info.spec;
  launch.set_token(info.token);
  launch.set_hostname(info.entry.host);
  launch.set_launcher_reports_end(true);
  if (info.rsh.empty()) {
    if (!conn || !conn->connected()) {
      conn.reset();
      auto c = SshConnection::Connect(info.target);
      if (!c.ok()) {
        ev.start_error = std::string(c.status().message());
        queue->Push(std::move(ev));
        return;
      }
      conn = std::move(*c);
    }
    std::string dial = info.dial_override.empty() ? conn->local_address() : info.dial_override;
    if (dial.empty()) {
      // Not a TCP socket (ProxyCommand/ProxyJump): the route to the host.
      auto ip = ResolveHost(info.entry.host);
      if (ip.ok()) dial = RouteSourceAddress(*ip, 22);
    }
    launch.set_rdzv_target(Endpoint{dial, info.port}.ToString());
    launch.set_local_addr(conn->peer_address());
    if (control->Level() == 0) {
      auto p = StartSshExec(conn.get(), absl::StrCat(ShellQuote(info.drun), " agent"),
                            EncodeAgentLaunch(launch));
      if (!p.ok()) {
        ev.start_error = std::string(p.status().message());
      } else {
        proc = std::move(*p);
      }
    }
  } else {
    const std::string dial = info.dial_override.empty() ? info.rsh_dial : info.dial_override;
    launch.set_rdzv_target(Endpoint{dial, info.port}.ToString());
    std::vector<std::string> argv = info.rsh;
    argv.push_back(HostLabel(info.entry));
    argv.push_back(info.drun);
    argv.push_back("agent");
    if (control->Level() == 0) {
      auto p = StartRshProcess(argv, EncodeAgentLaunch(launch));
      if (!p.ok()) {
        ev.start_error = std::string(p.status().message());
      } else {
        proc = std::move(*p);
      }
    }
  }
  if (proc) {
    control->Publish(proc);
    HostOutput output(info.entry.host);
    ev.outcome = proc->Run([&](int stream, const char* d, size_t n) { output.Feed(stream, d, n); });
    output.Flush();
    control->Clear();
  }
  proc.reset();  // closes the channel before the connection is handed back
  if (conn && conn->connected()) ev.conn = std::move(conn);
  queue->Push(std::move(ev));
}

std::string DescribeEnd(const Event& e) {
  if (!e.start_error.empty()) return absl::StrCat("the agent could not be started: ", e.start_error);
  const auto& o = e.outcome;
  if (!o.error.empty()) return o.error;
  if (!o.exit_signal.empty()) return absl::StrCat("the agent was killed by SIG", o.exit_signal);
  if (o.exit_status >= 0) return absl::StrCat("the agent exited with status ", o.exit_status);
  return "the agent's channel closed";
}

// Pre-flight of one host: connection, drun, the script. Returns the
// connection for the job (libssh) or nothing (--rsh), or one error line.
struct Preflight {
  absl::Status status;
  std::unique_ptr<SshConnection> conn;
  std::string rsh_dial;
};

// Runs one pre-flight command on a host: through the remote shell (libssh) or
// as argv (--rsh).
using CheckRunner = std::function<absl::StatusOr<CommandResult>(const std::string& shell_cmd,
                                                                std::vector<std::string> argv)>;

// The same drun, at the same version, is there. "" when it is.
std::string CheckDrun(const LaunchInfo& info, const std::string& local_version,
                      const CheckRunner& run) {
  auto version = run(absl::StrCat(ShellQuote(info.drun), " --version"), {info.drun, "--version"});
  if (!version.ok()) return absl::StrCat("checking drun there: ", version.status().message());
  if (version->exit_status != 0) {
    if (!info.rsh.empty() && version->exit_status == 255) {
      return absl::StrCat("cannot reach it with --rsh (exit 255): ", LastLine(version->err));
    }
    if (version->exit_status == 127) {
      return absl::StrCat("drun is not at ", info.drun,
                          " there; install it at the same path as here, or pass "
                          "--remote-drun PATH");
    }
    if (version->exit_status == 126) {
      return absl::StrCat(info.drun, " is not executable there (", LastLine(version->err),
                          "); fix its permissions or pass --remote-drun PATH");
    }
    return absl::StrCat("`", info.drun, " --version` failed there (exit ",
                        version->exit_status, "): ", LastLine(version->err));
  }
  if (VersionWords(version->out) != VersionWords(local_version)) {
    return absl::StrCat(info.drun, " there is ", VersionWords(version->out),
                        ", this is ", VersionWords(local_version),
                        "; install the same version, or pass --remote-drun PATH");
  }
  return "";
}

// The job's script and working directory exist there. "" when they do.
std::string CheckScript(const LaunchInfo& info, const CheckRunner& run) {
  const v1::JobSpec& spec = info.spec;
  const std::string& wd = spec.working_dir();
  std::string script;
  if (spec.kind() == v1::JobSpec::PYTHON_SCRIPT ||
      (spec.kind() == v1::JobSpec::PROGRAM && spec.entrypoint().find('/') != std::string::npos)) {
    script = spec.entrypoint();
    if (!script.empty() && script[0] != '/' && !wd.empty()) script = absl::StrCat(wd, "/", script);
  }
  if (!script.empty()) {
    auto t = run(absl::StrCat("test -f ", ShellQuote(script)), {"test", "-f", script});
    if (!t.ok()) return absl::StrCat("checking the script there: ", t.status().message());
    if (t->exit_status != 0) {
      if (!wd.empty()) {
        auto d = run(absl::StrCat("test -d ", ShellQuote(wd)), {"test", "-d", wd});
        if (d.ok() && d->exit_status != 0) {
          return absl::StrCat("the working directory ", wd,
                              " does not exist there; drun runs the job in the same "
                              "directory on every host (use a shared file system)");
        }
      }
      return absl::StrCat("the script ", script,
                          " is not there; copy it to every host (or use a shared file "
                          "system)");
    }
  } else if (!wd.empty()) {
    auto d = run(absl::StrCat("test -d ", ShellQuote(wd)), {"test", "-d", wd});
    if (d.ok() && d->exit_status != 0) {
      return absl::StrCat("the working directory ", wd, " does not exist there");
    }
  }
  return "";
}

Preflight CheckHost(const LaunchInfo& info, const std::string& local_version, Control* control) {
  Preflight result;
  auto fail = [&](std::string msg) {
    result.status = absl::FailedPreconditionError(std::move(msg));
    result.conn.reset();
    return std::move(result);
  };
  // Runs a check: through the remote shell (libssh) or as argv (--rsh). The
  // process is published on `control`, so a stop signal aborts it at once.
  auto run = [&](const std::string& shell_cmd,
                 std::vector<std::string> argv) -> absl::StatusOr<CommandResult> {
    if (control->Level() > 0) return absl::CancelledError("stopped");
    absl::StatusOr<std::unique_ptr<RemoteProcess>> p;
    if (info.rsh.empty()) {
      p = StartSshExec(result.conn.get(), shell_cmd, "");
    } else {
      std::vector<std::string> full = info.rsh;
      full.push_back(HostLabel(info.entry));
      full.insert(full.end(), argv.begin(), argv.end());
      p = StartRshProcess(full, "");
    }
    if (!p.ok()) return p.status();
    std::shared_ptr<RemoteProcess> proc = std::move(*p);
    control->Publish(proc);
    auto r = RunRemote(proc.get(), kCheckTimeoutMs);
    control->Clear();
    return r;
  };

  if (info.rsh.empty()) {
    auto c = SshConnection::Connect(info.target);
    if (!c.ok()) return fail(std::string(c.status().message()));
    result.conn = std::move(*c);
  } else if (info.dial_override.empty()) {
    auto ip = ResolveHost(info.entry.host);
    if (ip.ok()) result.rsh_dial = RouteSourceAddress(*ip, 22);
    if (result.rsh_dial.empty()) {
      return fail(absl::StrCat("cannot tell which address this host reaches this machine at (",
                               ip.ok() ? "no route to it" : ip.status().message(),
                               "); pass --rdzv-endpoint THIS_MACHINE:PORT"));
    }
  }

  std::string problem = CheckDrun(info, local_version, run);
  if (problem.empty()) problem = CheckScript(info, run);
  if (!problem.empty()) return fail(std::move(problem));
  return result;
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
  enum class State { kIdle, kRunning, kSettling, kExcluded, kDone };
  struct Host {
    HostPlan plan;
    LaunchInfo info;
    std::unique_ptr<SshConnection> conn;
    std::shared_ptr<Control> control;
    State state = State::kIdle;
    int instance = 0;
    int failures = 0;
    bool lost_counted = false;  // the live agent was reported lost
    bool alive = false;         // an agent thread of this host has not ended
    TimePoint settle_deadline;
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
  std::optional<int> RunPreflight(int sig_fd);
  void AnnounceAndStart(const v1::JobSpec& spec_in, int port);
  void Supervise(int sig_fd, RendezvousServer* server, double grace_s);
  int ExitCode() const;

  // The supervision loop's parts.
  std::optional<TimePoint> SettleDue(TimePoint now);
  void OnStopSignal(int sig, Duration end_bound);
  void DrainServer(RendezvousServer* server, Duration end_bound);

  void Start(Host& h);
  void Fail(Host& h, const std::string& why);
  void Settle(Host& h);
  void OnEnded(Event e);
  void OnLost(const std::string& host);
  void CheckViable();
  // A stop signal to every agent (they stop their workers with it).
  void ForwardAll(int sig);
  void StopAll(int level);
  bool AllEnded() const;
  Host* FindHost(const std::string& name);

  const CommandLine& cl_;
  const std::map<std::string, std::string>& env_;
  std::shared_ptr<EventQueue> queue_;
  SshPlan plan_;
  std::vector<Host> hosts_;
  std::vector<std::thread> threads_;  // agents' and pre-flight checks', joined at the end
  bool finished_ = false;
  int stop_level_ = 0;
  int stop_signal_ = 0;
  int exit_code_ = 0;
  std::optional<v1::Finish> finish_;
  std::optional<TimePoint> end_deadline_;
  std::optional<JobControl> control_;  // `drun stacks` on this machine
  std::optional<LauncherReport> report_;  // --summary, --report: every host's ranks
  double keepalive_timeout_s_ = 2;
};

SshLauncher::~SshLauncher() {
  StopAll(2);
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
  h.control = std::make_shared<Control>();
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
  if (finished_ || stop_level_ > 0) {
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
  if (finished_ || stop_level_ > 0) {
    h.state = State::kDone;
    if (finished_ && !e.start_error.empty()) SayLocked(absl::StrCat(h.plan.entry.host, ": ", DescribeEnd(e)));
    return;
  }
  const std::string why = DescribeEnd(e);
  if (h.lost_counted) {
    // Already counted when the rendezvous reported it lost. The connection may
    // be as dead as the agent (a cut link): the next agent gets a fresh one.
    h.conn.reset();
    if (h.state == State::kRunning) Start(h);
    return;
  }
  h.last_failure = why;
  if (!e.start_error.empty()) {
    // Never reached the rendezvous: nothing else will report it.
    h.state = State::kSettling;
    Settle(h);
  } else {
    h.state = State::kSettling;
    h.settle_deadline = Clock::now() + SecondsToDuration(keepalive_timeout_s_ + 1);
  }
  CheckViable();
}

void SshLauncher::OnLost(const std::string& name) {
  if (finished_ || stop_level_ > 0) return;
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
    h->control->Request(2);
  }
  CheckViable();
}

void SshLauncher::CheckViable() {
  if (finished_ || stop_level_ > 0) return;
  int usable = 0;
  std::vector<std::string> gone;
  for (const Host& h : hosts_) {
    if (h.state == State::kExcluded) {
      gone.push_back(absl::StrCat(h.plan.entry.host, " (", h.last_failure, ")"));
    } else {
      usable++;
    }
  }
  if (usable >= plan_.min_nodes) return;
  SayLocked(absl::StrCat("job failed: only ", usable, " usable host", usable == 1 ? "" : "s",
                   " left and the job needs at least ", plan_.min_nodes,
                   "; not usable: ", absl::StrJoin(gone, ", ")));
  exit_code_ = 1;
  StopAll(1);
}

void SshLauncher::ForwardAll(int sig) {
  stop_level_ = std::max(stop_level_, 1);
  for (Host& h : hosts_) {
    if (h.control) h.control->Forward(sig);
  }
}

void SshLauncher::StopAll(int level) {
  stop_level_ = std::max(stop_level_, level);
  for (Host& h : hosts_) {
    if (h.control) h.control->Request(level);
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
    auto ep = ParseEndpoint(spec_in.rdzv_endpoint(), 29400);
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
  static std::mutex known_hosts_mu;
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
    info.target.known_hosts_mu = &known_hosts_mu;
    hosts_.push_back(std::move(h));
  }
}

// Pre-flight, every host at once. Returns the exit code when the job cannot
// start (a check failed, or a stop signal came), nothing when it can.
std::optional<int> SshLauncher::RunPreflight(int sig_fd) {
  const std::string local_version = VersionText();
  struct Slot {
    std::mutex mu;
    std::vector<std::optional<Preflight>> results ABSL_GUARDED_BY(mu);
    int done ABSL_GUARDED_BY(mu) = 0;
  };
  auto slot = std::make_shared<Slot>();
  {
    std::lock_guard<std::mutex> lock(slot->mu);
    slot->results.resize(hosts_.size());
  }
  auto done_fd = std::make_shared<UniqueFd>(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  auto controls = std::make_shared<std::vector<std::shared_ptr<Control>>>();
  for (size_t i = 0; i < hosts_.size(); ++i) {
    controls->push_back(std::make_shared<Control>());
    threads_.emplace_back([slot, i, info = hosts_[i].info, local_version, done_fd,
                           control = controls->back()] {
      Preflight p = CheckHost(info, local_version, control.get());
      std::lock_guard<std::mutex> lock(slot->mu);
      slot->results[i] = std::move(p);
      slot->done++;
      uint64_t one = 1;
      (void)!write(done_fd->get(), &one, sizeof one);
    });
  }
  auto all_done = [&] {
    std::lock_guard<std::mutex> lock(slot->mu);
    return slot->done == static_cast<int>(hosts_.size());
  };
  while (!all_done()) {
    pollfd fds[2] = {{done_fd->get(), POLLIN, 0}, {sig_fd, POLLIN, 0}};
    if (PollUntil(fds, 2, std::nullopt) < 0) break;
    if (fds[1].revents) {
      signalfd_siginfo si;
      if (read(sig_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si) &&
          !IsUserSignal(static_cast<int>(si.ssi_signo))) {  // no worker to tell yet
        SayLocked(absl::StrCat("got ", SignalName(static_cast<int>(si.ssi_signo)),
                         " during the pre-flight checks: nothing was started"));
        // The checks still running are aborted; the destructor joins them.
        for (auto& c : *controls) c->Request(2);
        return ExitCodeForSignal(static_cast<int>(si.ssi_signo));
      }
    }
    uint64_t v;
    while (read(done_fd->get(), &v, sizeof v) > 0) {
    }
  }
  int failed = 0;
  {
    std::lock_guard<std::mutex> lock(slot->mu);
    for (size_t i = 0; i < hosts_.size(); ++i) {
      Preflight& p = *slot->results[i];
      if (!p.status.ok()) {
        failed++;
        SayLocked(absl::StrCat(HostLabel(hosts_[i].plan.entry), ": ", p.status.message()));
        continue;
      }
      hosts_[i].conn = std::move(p.conn);
      hosts_[i].info.rsh_dial = p.rsh_dial;
    }
  }
  if (failed == 0) return std::nullopt;
  SayLocked(absl::StrCat("pre-flight failed on ", failed, " of ", hosts_.size(), " host",
                   hosts_.size() == 1 ? "" : "s", "; nothing was started"));
  return 1;
}

void SshLauncher::AnnounceAndStart(const v1::JobSpec& spec_in, int port) {
  if (!spec_in.quiet()) {
    std::vector<std::string> names, spares;
    for (const Host& h : hosts_) (h.plan.spare ? spares : names).push_back(h.plan.entry.host);
    SayLocked(absl::StrCat("starting agents on ", names.size(), " host", names.size() == 1 ? "" : "s",
                     " (", absl::StrJoin(names, ", "), ")",
                     spares.empty() ? "" : absl::StrCat(" and ", spares.size(), " spare",
                                                        spares.size() == 1 ? "" : "s", " (",
                                                        absl::StrJoin(spares, ", "), ")"),
                     "; rendezvous on port ", port));
  }
  for (Host& h : hosts_) {
    if (!h.plan.spare) Start(h);
  }
  for (Host& h : hosts_) {
    if (h.plan.spare) Start(h);
  }
}

// Settles the hosts whose wait is over; the earliest wait still running.
std::optional<TimePoint> SshLauncher::SettleDue(TimePoint now) {
  std::optional<TimePoint> next;
  for (Host& h : hosts_) {
    if (h.state != State::kSettling) continue;
    if (h.settle_deadline <= now) {
      Settle(h);
      continue;
    }
    if (!next || h.settle_deadline < *next) next = h.settle_deadline;
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
    StopAll(2);
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
  for (;;) {
    if ((finished_ || stop_level_ > 0) && AllEnded()) break;
    const TimePoint now = Clock::now();
    std::optional<TimePoint> deadline = SettleDue(now);
    if (end_deadline_ && (!deadline || *end_deadline_ < *deadline)) deadline = end_deadline_;
    pollfd fds[4] = {{sig_fd, POLLIN, 0},
                     {server->event_fd(), POLLIN, 0},
                     {queue_->fd(), POLLIN, 0},
                     {control_ ? control_->fd() : -1, POLLIN, 0}};
    if (PollUntil(fds, 4, deadline) < 0) break;
    if (end_deadline_ && Clock::now() >= *end_deadline_) {
      if (stop_level_ >= 2) break;  // dropped everything and still waiting: give up
      SayLocked("agents did not end in time; dropping their connections");
      StopAll(2);
      end_deadline_ = Clock::now() + std::chrono::seconds(5);
    }
    if (fds[0].revents) {
      DrainSignalFd(sig_fd, [&](int sig, const signalfd_siginfo&) {
        if (IsUserSignal(sig)) {
          for (Host& h : hosts_) {
            if (h.control) h.control->Forward(sig);
          }
        } else {
          OnStopSignal(sig, end_bound);
        }
      });
    }
    if (fds[3].revents) control_->OnReadable();
    DrainServer(server, end_bound);
    while (auto ev = queue_->Pop()) OnEnded(std::move(*ev));
  }
}

int SshLauncher::ExitCode() const {
  if (stop_signal_ != 0) return ExitCodeForSignal(stop_signal_);
  if (exit_code_ != 0) return exit_code_;
  if (finish_) return finish_->exit_code();
  return 1;
}

int SshLauncher::Run(const v1::JobSpec& spec_in, std::string token) {
  std::vector<std::string> rsh;
  auto rdzv = PlanJob(spec_in, &rsh);
  if (!rdzv.ok()) {
    SayLocked(rdzv.status().message());
    return 2;
  }
  if (token.empty()) token = RandomHex(24);
  if (!cl_.report_path.empty()) {
    if (absl::Status st = CheckReportPath(cl_.report_path); !st.ok()) {
      SayLocked(st.message());
      return kExitBadInput;
    }
  }
  report_.emplace(spec_in.run_id(), cl_.summary, cl_.report_path, Clock::now());
  keepalive_timeout_s_ = spec_in.keepalive_timeout_s() > 0 ? spec_in.keepalive_timeout_s() : 2;
  AddHosts(token, *rdzv, std::move(rsh));

  // The stop signals come through a signalfd; blocked before any thread.
  sigset_t stop_set;
  sigemptyset(&stop_set);
  for (int s : kHandledSignals) sigaddset(&stop_set, s);
  pthread_sigmask(SIG_BLOCK, &stop_set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  const UniqueFd sig_fd(signalfd(-1, &stop_set, SFD_CLOEXEC | SFD_NONBLOCK));

  if (auto code = RunPreflight(sig_fd.get())) return *code;

  // The rendezvous, on every interface (agents dial the address at which
  // their host sees this machine).
  bool v6 = rdzv->dial_override.find(':') != std::string::npos;
  for (const Host& h : hosts_) {
    if (h.conn && h.conn->local_address().find(':') != std::string::npos) v6 = true;
  }
  v1::JobSpec job_spec = spec_in;
  job_spec.set_min_nodes(plan_.min_nodes);
  job_spec.set_max_nodes(plan_.max_nodes);
  auto job = JobHost::Start(job_spec, token, v6 ? "::" : "0.0.0.0", rdzv->port, JobHost::Members::kOpen);
  if (!job.ok()) {
    SayLocked(absl::StrCat("cannot serve the rendezvous: ", job.status().message()));
    return 1;
  }
  RendezvousServer* server = (*job)->server();
  for (Host& h : hosts_) h.info.port = (*job)->port();
  control_ = JobControl::Open(env_, spec_in.run_id(), server);
  AnnounceAndStart(spec_in, (*job)->port());

  Supervise(sig_fd.get(), server,
            spec_in.shutdown_timeout_s() > 0 ? spec_in.shutdown_timeout_s() : 30);
  server->Shutdown(std::chrono::seconds(1));
  for (Host& h : hosts_) h.conn.reset();
  // The table of every host's ranks first, the root cause last.
  const int code = ExitCode();
  report_->End(code, finish_ ? &*finish_ : nullptr, Clock::now());
  if (stop_signal_ == 0 && exit_code_ == 0 && finish_) JobHost::Report(*finish_);
  return code;
}

}  // namespace

int RunSshLauncher(const CommandLine& cl, const v1::JobSpec& spec, const std::string& token,
                   const std::map<std::string, std::string>& env) {
  SshLauncher launcher(cl, env);
  return launcher.Run(spec, token);
}

}  // namespace drun

#include "launcher/slurm/slurm_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/agent.h"
#include "agent/agent_launch.h"
#include "agent/log_layout.h"
#include "agent/output.h"
#include "agent/process.h"
#include "agent/worker_group.h"
#include "launcher/hosts/hostlist.h"
#include "launcher/job_control.h"
#include "launcher/job_host.h"
#include "launcher/node.h"
#include "launcher/slurm/slurm_env.h"
#include "launcher/slurm/srun_relay.h"
#include "launcher/ssh/ssh_console.h"
#include "rendezvous/base/clock.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/event_loop.h"
#include "rendezvous/base/poll_set.h"
#include "rendezvous/base/random.h"
#include "rendezvous/base/spawn.h"
#include "rendezvous/base/signal_name.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/exit_code.h"
#include "rendezvous/base/words.h"


namespace drun {

namespace {

using Env = std::map<std::string, std::string>;


std::string Get(const Env& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

// The address the agents dial: --local-addr; 127.0.0.1 in a one-node
// allocation of this node; else the source address of this machine's route
// toward another node of the allocation at its NodeAddr as slurmctld knows it
// (an salloc shell on a login host, where the nodes' names need not resolve),
// or at its name when scontrol says nothing. None: an error naming --local-addr.
absl::StatusOr<std::string> DialHost(const v1::JobSpec& spec, const Env& env, int port) {
  if (!spec.local_addr().empty()) return spec.local_addr();
  const std::string self = SlurmNodeName(env);
  std::string list = Get(env, "SLURM_JOB_NODELIST");
  if (list.empty()) list = Get(env, "SLURM_NODELIST");
  auto nodes = ExpandHostlist(list, 100000);
  if (nodes.ok() && !nodes->empty() &&
      std::all_of(nodes->begin(), nodes->end(), [&](const std::string& n) { return n == self; })) {
    return std::string("127.0.0.1");  // a one-node allocation
  }
  const std::string path = Get(env, "PATH");
  std::vector<std::string> addrs;
  for (const auto& [name, addr] : SlurmNodeAddrs(list, path.empty() ? "/usr/bin:/bin" : path)) {
    if (name != self) addrs.push_back(addr);
  }
  std::string src = AddressTowardAny(addrs, port);
  if (src.empty()) src = AddressTowardOtherNodes(list, self, port);
  if (!src.empty()) return src;
  return absl::UnavailableError(absl::StrCat(
      "cannot tell which address of ", self.empty() ? "this machine" : self,
      " the agents can reach: no node of the allocation (", list,
      ") has an address (its NodeAddr, or its name) that routes from here; give --local-addr "
      "ADDR, this machine's address that the nodes reach"));
}

// srun with its standard input on `stdin_fd` and its output on `out_fd` and
// `err_fd`, in its own process group (so a Ctrl-C reaches drun, which
// decides), with default signal handling.
absl::StatusOr<pid_t> SpawnSrun(const std::vector<std::string>& argv, int stdin_fd, int out_fd, int err_fd) {
  SpawnStdio stdio;
  stdio.in = stdin_fd;
  stdio.out = out_fd;
  stdio.err = err_fd;
  pid_t pid;
  const int rc = SpawnInOwnGroup(argv, stdio, &pid);
  if (rc != 0) return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": ", strerror(rc)));
  return pid;
}

std::string DescribeStatus(int status) {
  if (WIFSIGNALED(status)) return absl::StrCat("killed by ", SignalName(WTERMSIG(status)));
  return absl::StrCat("exit code ", WEXITSTATUS(status));
}

}  // namespace

std::vector<std::string> SrunAgentArgv(const std::string& srun, int nodes,
                                       const std::string& drun_path) {
  return {srun,
          absl::StrCat("--nodes=", nodes),
          absl::StrCat("--ntasks=", nodes),
          "--ntasks-per-node=1",
          // One agent gone means the job cannot go on; end the step rather
          // than leave the others waiting for it.
          "--kill-on-bad-exit=1",
          // The launch message must reach every agent, not only task 0.
          "--input=all",
          // Each agent runs all of its node's workers: give the step all the
          // job's CPUs (and GPUs) there, not one CPU per task.
          "--whole",
          "--mpi=none",
          "--job-name=drun-agents",
          drun_path,
          "agent"};
}

namespace {

// srun running `drun agent` on every node, fed the launch message through a
// pipe that then stays open as the agents' lifeline; its stdout and stderr
// (the agents' relay frames, srun's own messages) come back on two pipes.
struct SrunStep {
  pid_t pid = -1;
  UniqueFd lifeline;
  UniqueFd output[2];  // srun's stdout and stderr, non-blocking
};

absl::StatusOr<SrunStep> StartAgentStep(const std::vector<std::string>& argv,
                                        const std::string& message) {
  UniqueFd read_end, write_end, out_read, out_write, err_read, err_write;
  if (!MakePipe(&read_end, &write_end) || !MakePipe(&out_read, &out_write, O_CLOEXEC | O_NONBLOCK) ||
      !MakePipe(&err_read, &err_write, O_CLOEXEC | O_NONBLOCK)) {
    return absl::InternalError(absl::StrCat("cannot create a pipe: ", strerror(errno)));
  }
  // srun's ends block as usual (O_NONBLOCK is the pipe's, both ends'): clear it there.
  for (int fd : {out_write.get(), err_write.get()}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  auto pid = SpawnSrun(argv, read_end.get(), out_write.get(), err_write.get());
  if (!pid.ok()) return pid.status();
  SrunStep step;
  step.pid = *pid;
  step.lifeline = std::move(write_end);
  step.output[0] = std::move(out_read);
  step.output[1] = std::move(err_read);
  // srun reads its standard input as soon as it runs; if it died at once the
  // write fails with EPIPE and its exit status says why.
  WriteAll(step.lifeline.get(), message);
  return step;
}

// drun's own lines while srun runs go through the hosts' console, after
// ending any host's open line.
void Tell(absl::string_view message) { ConsoleHub::Get().Text(DrunLine(message)); }

// Watches srun and the rendezvous until srun ends: forwards signals, stops
// the agents in escalating steps, shows the agents' output (srun_relay.h),
// and remembers what the job's end needs.
class StepSupervisor {
 public:
  StepSupervisor(const v1::JobSpec& spec, SrunStep step, StdinRelay* stdin_relay,
                 RendezvousServer* server, std::optional<JobControl> control, LauncherReport report)
      : grace_(SecondsToDuration(spec.shutdown_timeout_s() + 15)),
        step_(std::move(step)),
        stdin_(stdin_relay),
        server_(server),
        control_(std::move(control)),
        report_(std::move(report)) {}

  void Run(int signal_fd);
  int Report();

 private:
  void Escalate(TimePoint now);
  void OnSignal(int sig, TimePoint now);
  void DrainEvents();
  void RelayStdin();
  // Reads srun's stream i (0: stdout, 1: stderr) while it has bytes (once
  // srun ended: all of them); closes it at its end.
  void ReadOutput(int i, bool drain);
  int ExitCode() const;

  const Duration grace_;
  SrunStep step_;
  StdinRelay* stdin_;  // drun's stdin, for the agents (--stdin)
  RendezvousServer* server_;
  std::optional<JobControl> control_;  // `drun stacks` on this machine
  LauncherReport report_;              // --summary, --report: every host's ranks
  std::optional<TimePoint> deadline_;
  // 0: none; 1: the agents were told (a signal's notice, or the lifeline
  // closed); 2: srun told to kill; 3: srun killed.
  int escalation_ = 0;
  std::optional<v1::Finish> finish_;
  std::vector<std::string> lost_;
  std::set<std::string> lost_seen_;
  int stop_signal_ = 0;
  std::optional<int> srun_status_;
  std::unique_ptr<SrunOutputRelay> relays_[2];  // srun's stdout and stderr, while Run runs
};

void StepSupervisor::Escalate(TimePoint now) {
  if (escalation_ == 0 && step_.lifeline.valid()) {
    step_.lifeline.reset();
    escalation_ = 1;
  } else if (escalation_ <= 1) {
    kill(step_.pid, SIGTERM);  // srun: "forcing job termination", SIGKILL to the step
    escalation_ = 2;
  } else {
    kill(step_.pid, SIGKILL);
    escalation_ = 3;
  }
  deadline_ = now + grace_;
}

void StepSupervisor::OnSignal(int sig, TimePoint now) {
  if (sig == SIGCHLD) return;  // reaped in Run
  if (sig == SIGUSR1 || sig == SIGUSR2) {
    kill(step_.pid, sig);  // srun forwards these to the agents, they to the workers
    return;
  }
  if (stop_signal_ == 0) {
    stop_signal_ = sig;
    Tell(absl::StrCat("got ", SignalName(sig), ": stopping the agents (", SignalName(sig),
                     " again stops them at once)"));
    if (escalation_ == 0 && step_.lifeline.valid()) {
      // srun hands the notice to every agent, which stops its workers with
      // this same signal and the grace. The lifeline stays open: its end
      // would be news of its own (the launcher's loss).
      WriteAll(step_.lifeline.get(), EncodeLifelineSignal(sig));
      escalation_ = 1;
      deadline_ = now + grace_;
      return;
    }
  } else {
    Tell(absl::StrCat("got ", SignalName(sig), " again: srun ends the step now"));
  }
  Escalate(now);
}

void StepSupervisor::DrainEvents() {
  while (auto ev = server_->NextEvent()) {
    if (ev->kind == RendezvousServer::Event::kStacks) {
      if (control_) control_->OnStacks(*ev);
    } else if (ev->kind == RendezvousServer::Event::kReport) {
      report_.Add(ev->report);
    } else if (ev->kind == RendezvousServer::Event::kFinished) {
      if (!finish_) finish_ = ev->finish;
      if (!deadline_) deadline_ = Clock::now() + grace_;  // agents exit at once after Finish
    } else if (ev->kind == RendezvousServer::Event::kNodeLost && !finish_ &&
               lost_seen_.insert(ev->host).second) {
      lost_.push_back(ev->host);
      // While stopping on a signal, agents leaving is the plan, not news.
      if (stop_signal_ == 0) Tell(absl::StrCat("lost the agent on ", ev->host));
    }
  }
}

// drun's stdin goes to every agent on the lifeline (srun --input=all); each
// hands it to its workers --stdin names. Once the agents were told to stop,
// the lifeline carries nothing more.
void StepSupervisor::RelayStdin() {
  const std::string notices = stdin_->Read();
  if (stdin_->echoed()) ConsoleHub::Get().InputEchoed();  // the ranks' lines are this console's
  if (!notices.empty() && step_.lifeline.valid() && escalation_ == 0) {
    WriteAll(step_.lifeline.get(), notices);
  }
}

void StepSupervisor::ReadOutput(int i, bool drain) {
  UniqueFd& fd = step_.output[i];
  SrunOutputRelay::Read r = SrunOutputRelay::Read::kMore;
  while (fd.valid() && r == SrunOutputRelay::Read::kMore) {
    r = relays_[i]->ReadFrom(fd.get());
    if (r == SrunOutputRelay::Read::kEnded) fd.reset();
    if (!drain) break;
  }
}

void StepSupervisor::Run(int signal_fd) {
  ConsoleHub& console = ConsoleHub::Get();
  for (int i : {0, 1}) relays_[i] = std::make_unique<SrunOutputRelay>(&console, i + 1);
  PollSet set;
  set.Add(signal_fd, POLLIN, [&](short) {
    const TimePoint now = Clock::now();
    DrainSignalFd(signal_fd, [&](int sig, const signalfd_siginfo&) { OnSignal(sig, now); });
  });
  set.Add(server_->event_fd(), POLLIN, [&](short) { DrainEvents(); });
  if (control_) set.Add(control_->fd(), POLLIN, [&](short) { control_->OnReadable(); });
  const PollSet::Id stdin_id = set.Add(stdin_->fd(), POLLIN, [&](short) { RelayStdin(); });
  PollSet::Id output_ids[2];
  for (int i : {0, 1}) output_ids[i] = set.Add(step_.output[i].get(), POLLIN, [this, i](short) { ReadOutput(i, false); });
  // The console's descriptors that are full only end the wait: Tick() writes.
  const PollSet::Id blocked_ids[2] = {set.Add(-1, POLLOUT, [](short) {}), set.Add(-1, POLLOUT, [](short) {})};
  while (!srun_status_) {
    set.SetFd(stdin_id, escalation_ == 0 ? stdin_->fd() : -1);  // none once the agents were told to stop
    // srun's output: not while the console is behind (srun, and so the agents, wait), -1 once it ended.
    const bool behind = console.congested();
    for (int i : {0, 1}) set.SetFd(output_ids[i], behind ? -1 : step_.output[i].get());
    std::optional<TimePoint> wake = deadline_;
    // The partial lines that are due; the console's descriptors that are full.
    if (std::optional<TimePoint> due = console.Tick(); due && (!wake || *due < *wake)) wake = due;
    const std::vector<int> blocked = console.BlockedFds();
    for (size_t i = 0; i < 2; ++i) set.SetFd(blocked_ids[i], i < blocked.size() ? blocked[i] : -1);
    if (set.Poll(wake) < 0) {
      Tell(absl::StrCat("poll failed: ", strerror(errno)));
      kill(step_.pid, SIGTERM);
      break;
    }
    const TimePoint now = Clock::now();
    if (deadline_ && now >= *deadline_) Escalate(now);
    int status;
    if (waitpid(step_.pid, &status, WNOHANG) == step_.pid) srun_status_ = status;
  }
  // srun is gone: what it wrote is in the pipes.
  for (int i : {0, 1}) {
    ReadOutput(i, true);
    relays_[i].reset();  // a last partial line ends here, before the end's report
  }
  step_.lifeline.reset();
  DrainEvents();
  console.Drain();
}

int StepSupervisor::ExitCode() const {
  if (stop_signal_ != 0) return ExitCodeForSignal(stop_signal_);
  if (finish_) return finish_->exit_code();
  if (!srun_status_) return kExitLauncherFailed;
  const int srun_code = ExitCodeOfStatus(*srun_status_);
  return srun_code != 0 ? srun_code : 1;
}

// Logs stay on the nodes (usually a file system this machine shares): one
// line for each node whose log directory is not visible here, saying where it is.
static std::vector<std::string> SayNodeLogs(std::vector<v1::NodeReport>& nodes) {
  std::vector<std::string> stay;
  for (v1::NodeReport& n : nodes) {
    const LogLayout::Collection c = LogLayout::PlanCollection(
        n, "", "not visible from the launcher's machine (--launcher slurm copies no logs)");
    if (c.kind == LogLayout::Collection::Kind::kNoLogs) continue;
    if (c.kind == LogLayout::Collection::Kind::kHere) {
      n.set_logs_collected_to(c.dir);
      continue;
    }
    n.set_logs_not_collected(c.why);
    Say(absl::StrCat(n.host(), ": its logs stay on that node, not visible here: ", n.host(), ":", n.log_dir()));
    stay.push_back(absl::StrCat(n.host(), ":", n.log_dir()));
  }
  return stay;
}

// The table of every host's ranks first (on failure, or --summary) and
// --report; then why the job ended, the root cause last.
int StepSupervisor::Report() {
  const int code = ExitCode();
  report_.SetLogsNotCollected(SayNodeLogs(report_.nodes()));
  report_.SetRefusedConnections(server_->refused_connections());
  report_.End(code, finish_ ? &*finish_ : nullptr, Clock::now());
  if (stop_signal_ != 0) {
    Say(absl::StrCat("job stopped by ", SignalName(stop_signal_),
                     " (scancel, the job's time limit, or a signal to drun); srun ",
                     srun_status_ ? DescribeStatus(*srun_status_) : "did not end", "; exit code ", code));
    if (finish_ && finish_->has_failure()) WriteAll(2, FormatRootCause(finish_->failure()));
    return code;
  }
  if (finish_) return JobHost::Report(*finish_);
  if (!srun_status_) return code;
  std::string msg = absl::StrCat("the agents' srun step ended (", DescribeStatus(*srun_status_),
                                 ") before the job finished");
  if (!lost_.empty()) {
    absl::StrAppend(&msg, "; lost agents: ", absl::StrJoin(lost_, ", "), " (", lost_.front(),
                    " first: its task ended, so srun --kill-on-bad-exit stopped the others)");
  } else {
    absl::StrAppend(&msg, "; see srun's messages above");
  }
  Say(msg);
  return code;
}

}  // namespace

int RunSlurmLauncher(const CommandLine& cl, const v1::JobSpec& spec_in, const std::string& token_in,
                     const Env& env) {
  // Every node's logs under one run directory, fresh for this run.
  v1::JobSpec spec = spec_in;
  LogLayout::NameRun(&spec);
  if (!spec.quiet() && !spec.log_run_dir().empty()) {
    Say(LogLayout::RunDirLine(LogLayout::RunDir(spec), "a directory per node, made by the node"));
  }
  // Before any thread exists (JobHost starts gRPC's): only our signalfd sees these.
  Agent::BlockHandledSignals();
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  const UniqueFd sfd(signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!sfd.valid()) {
    Say(absl::StrCat("cannot create a signalfd: ", strerror(errno)));
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);

  const std::string token = token_in.empty() ? RandomHex(16) : token_in;
  if (!cl.report_path.empty()) {
    if (absl::Status st = CheckReportPath(cl.report_path); !st.ok()) {
      Say(std::string(st.message()));
      return kExitBadInput;
    }
  }
  LauncherReport report(spec.run_id(), cl.summary, cl.report_path, Clock::now());
  auto host = JobHost::Start(spec, token, "0.0.0.0", 0, JobHost::Members::kFixed);
  if (!host.ok()) {
    Say(absl::StrCat("cannot host the rendezvous: ", host.status().message()));
    return 1;
  }
  const absl::StatusOr<std::string> dial_or = DialHost(spec, env, (*host)->port());
  if (!dial_or.ok()) {
    Say(std::string(dial_or.status().message()));
    return kExitLauncherFailed;
  }
  const std::string& dial = *dial_or;
  v1::AgentLaunch launch = (*host)->Launch(dial);
  launch.set_console_relay(true);  // srun holds partial lines: the agents write frames (srun_relay.h)
  const std::string message = EncodeAgentLaunch(launch);

  std::string path = Get(env, "PATH");
  std::string srun = FindOnPath("srun", path.empty() ? "/usr/bin:/bin" : path);
  if (srun.empty()) {
    Say("--launcher slurm needs srun, which is not on PATH here");
    return 1;
  }
  const int nodes = spec.max_nodes();
  std::vector<std::string> argv =
      SrunAgentArgv(srun, nodes, cl.remote_drun.empty() ? DrunPath() : cl.remote_drun);
  Say(absl::StrCat("Slurm job ", Get(env, "SLURM_JOB_ID"), ": rendezvous on ", dial, ":",
                   (*host)->port(), ", run id ", spec.run_id(), "; starting ", Count(nodes, "agent"),
                   ", --nproc-per-node ", spec.nproc_per_node(), ": ", absl::StrJoin(argv, " ")));
  StdinRelay stdin_relay(spec.stdin_target().mode() != v1::JobSpec::StdinTarget::NONE);
  auto step = StartAgentStep(argv, message + stdin_relay.ForNewAgent());
  if (!step.ok()) {
    Say(std::string(step.status().message()));
    return 1;
  }
  StepSupervisor supervisor(spec, std::move(*step), &stdin_relay, (*host)->server(),
                            JobControl::Open(env, spec.run_id(), (*host)->server()), std::move(report));
  supervisor.Run(sfd.get());
  (*host)->server()->Shutdown(std::chrono::seconds(1));
  return supervisor.Report();
}

}  // namespace drun

#include "launcher/slurm/slurm_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/agent.h"
#include "agent/output.h"
#include "agent/process.h"
#include "agent/worker_group.h"
#include "launcher/hosts/hostlist.h"
#include "launcher/job_host.h"
#include "rendezvous/base/clock.h"
#include "rendezvous/base/endpoint.h"
#include "rendezvous/base/random.h"
#include "rendezvous/base/signal_name.h"
#include "rendezvous/base/unique_fd.h"

extern char** environ;

namespace drun {

namespace {

using Env = std::map<std::string, std::string>;

void Say(const std::string& line) { WriteAll(2, absl::StrCat("drun: ", line, "\n")); }

std::string Get(const Env& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? "" : it->second;
}

std::string ThisNode(const Env& env) {
  std::string n = Get(env, "SLURMD_NODENAME");
  if (!n.empty()) return n;
  char buf[256] = {0};
  return gethostname(buf, sizeof buf - 1) == 0 ? buf : "";
}

// The address the agents dial: --local-addr, else the source address this node
// uses towards another node of the allocation (what that node sees us as),
// else our node name for the agents to resolve.
std::string DialHost(const v1::JobSpec& spec, const Env& env, int port) {
  if (!spec.local_addr().empty()) return spec.local_addr();
  const std::string self = ThisNode(env);
  std::string list = Get(env, "SLURM_JOB_NODELIST");
  if (list.empty()) list = Get(env, "SLURM_NODELIST");
  auto nodes = ExpandHostlist(list, 100000);
  bool others = false;
  if (nodes.ok()) {
    for (const std::string& n : *nodes) {
      if (n == self) continue;
      others = true;
      auto ip = ResolveHost(n);
      if (!ip.ok()) continue;
      std::string src = RouteSourceAddress(*ip, port);
      if (!src.empty()) return src;
    }
  }
  if (!others && nodes.ok() && !nodes->empty()) return "127.0.0.1";  // a one-node allocation
  return self.empty() ? "127.0.0.1" : self;
}

// srun with its standard input on `stdin_fd`, in its own process group (so a
// Ctrl-C reaches drun, which decides), with default signal handling.
absl::StatusOr<pid_t> SpawnSrun(const std::vector<std::string>& argv, int stdin_fd) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, stdin_fd, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0].c_str(), &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
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

int RunSlurmLauncher(const CommandLine& cl, const v1::JobSpec& spec, const std::string& token_in,
                     const Env& env) {
  // Before any thread exists (JobHost starts gRPC's): only our signalfd sees these.
  Agent::BlockHandledSignals();
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    Say(absl::StrCat("cannot create a signalfd: ", strerror(errno)));
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);

  const std::string token = token_in.empty() ? RandomHex(16) : token_in;
  auto host = JobHost::Start(spec, token, "0.0.0.0", 0);
  if (!host.ok()) {
    Say(absl::StrCat("cannot host the rendezvous: ", host.status().message()));
    return 1;
  }
  const std::string dial = DialHost(spec, env, (*host)->port());
  const std::string message = (*host)->LaunchMessage(dial, "", "");

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
                   (*host)->port(), ", run id ", spec.run_id(), "; starting ", nodes,
                   " agent(s): ", absl::StrJoin(argv, " ")));

  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    Say(absl::StrCat("cannot create a pipe: ", strerror(errno)));
    return 1;
  }
  auto pid = SpawnSrun(argv, pipefd[0]);
  close(pipefd[0]);
  if (!pid.ok()) {
    close(pipefd[1]);
    Say(std::string(pid.status().message()));
    return 1;
  }
  int lifeline = pipefd[1];
  // srun reads its standard input as soon as it runs; if it died at once the
  // write fails with EPIPE and the exit status below says why.
  WriteAll(lifeline, message);

  using Clock = std::chrono::steady_clock;
  const auto grace = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(spec.shutdown_timeout_s() + 15));
  std::optional<Clock::time_point> deadline;
  int escalation = 0;  // 0: none; 1: lifeline closed; 2: srun told to kill; 3: srun killed
  auto escalate = [&](Clock::time_point now) {
    if (escalation == 0 && lifeline >= 0) {
      close(lifeline);
      lifeline = -1;
      escalation = 1;
    } else if (escalation <= 1) {
      kill(*pid, SIGTERM);  // srun: "forcing job termination", SIGKILL to the step
      escalation = 2;
    } else {
      kill(*pid, SIGKILL);
      escalation = 3;
    }
    deadline = now + grace;
  };

  std::optional<v1::Finish> finish;
  std::vector<std::string> lost;
  std::set<std::string> lost_seen;
  int stop_signal = 0;
  std::optional<int> srun_status;
  auto drain_events = [&]() {
    while (auto ev = (*host)->server()->NextEvent()) {
      if (ev->kind == RendezvousServer::Event::kFinished) {
        if (!finish) finish = ev->finish;
        if (!deadline) deadline = Clock::now() + grace;  // agents exit at once after Finish
      } else if (!finish && lost_seen.insert(ev->host).second) {
        lost.push_back(ev->host);
        // While stopping on a signal, agents leaving is the plan, not news.
        if (stop_signal == 0) Say(absl::StrCat("lost the agent on ", ev->host));
      }
    }
  };

  while (!srun_status) {
    std::vector<pollfd> fds = {{sfd, POLLIN, 0}, {(*host)->server()->event_fd(), POLLIN, 0}};
    int timeout_ms = -1;
    if (deadline) {
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      timeout_ms = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(ms, 1 << 30)));
    }
    int n = poll(fds.data(), fds.size(), timeout_ms);
    if (n < 0 && errno != EINTR) {
      Say(absl::StrCat("poll failed: ", strerror(errno)));
      kill(*pid, SIGTERM);
      break;
    }
    const auto now = Clock::now();
    signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
      const int sig = static_cast<int>(si.ssi_signo);
      if (sig == SIGCHLD) continue;  // reaped below
      if (sig == SIGUSR1 || sig == SIGUSR2) {
        kill(*pid, sig);  // srun forwards these to the agents, they to the workers
        continue;
      }
      if (stop_signal == 0) {
        stop_signal = sig;
        Say(absl::StrCat("got ", SignalName(sig), ": stopping the agents (", SignalName(sig),
                         " again stops them at once)"));
        escalation = 0;
        escalate(now);
      } else {
        Say(absl::StrCat("got ", SignalName(sig), " again: srun ends the step now"));
        escalate(now);
      }
    }
    drain_events();
    if (deadline && now >= *deadline) escalate(now);
    int status;
    pid_t r = waitpid(*pid, &status, WNOHANG);
    if (r == *pid) srun_status = status;
  }
  if (lifeline >= 0) close(lifeline);
  drain_events();
  (*host)->server()->Shutdown(std::chrono::seconds(1));
  close(sfd);

  const int srun_code = !srun_status                  ? 1
                        : WIFSIGNALED(*srun_status) ? 128 + WTERMSIG(*srun_status)
                                                      : WEXITSTATUS(*srun_status);
  if (stop_signal != 0) {
    Say(absl::StrCat("job stopped by ", SignalName(stop_signal),
                     " (scancel, the job's time limit, or a signal to drun); srun ",
                     srun_status ? DescribeStatus(*srun_status) : "did not end", "; exit code ",
                     128 + stop_signal));
    if (finish && finish->has_failure()) WriteAll(2, FormatRootCause(finish->failure()));
    return 128 + stop_signal;
  }
  if (finish) return JobHost::Report(*finish);
  std::string msg = absl::StrCat("the agents' srun step ended (", DescribeStatus(*srun_status),
                                 ") before the job finished");
  if (!lost.empty()) {
    absl::StrAppend(&msg, "; lost agents: ", absl::StrJoin(lost, ", "), " (", lost.front(),
                    " first: its task ended, so srun --kill-on-bad-exit stopped the others)");
  } else {
    absl::StrAppend(&msg, "; see srun's messages above");
  }
  Say(msg);
  return srun_code != 0 ? srun_code : 1;
}

}  // namespace drun

#include "launcher/ssh/ssh_logs.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/log_layout.h"
#include "rendezvous/base/event_loop.h"
#include "rendezvous/base/mutex.h"
#include "rendezvous/base/poll_set.h"
#include "rendezvous/base/private_files.h"
#include "rendezvous/base/quote.h"
#include "rendezvous/base/signal_name.h"
#include "rendezvous/base/spawn.h"
#include "rendezvous/base/unique_fd.h"
#include "rendezvous/base/wake_fd.h"
#include "rendezvous/base/words.h"


namespace drun {

namespace {

// The first line of a tool's complaint, for a one-line reason.
std::string FirstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() > 300 ? line.substr(0, 300) : line;
}

// A local `tar -xf - -C dest`, in its own process group (a terminal's Ctrl-C
// is the launcher's to act on) with default signals, its stdin a pipe.
class LocalExtract {
 public:
  absl::Status Start(const std::string& dest) {
    int in[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0) return absl::InternalError(strerror(errno));
    in_.reset(in[1]);
    UniqueFd child_in(in[0]);
    if (pipe2(err, O_CLOEXEC) != 0) return absl::InternalError(strerror(errno));
    err_.reset(err[0]);
    UniqueFd child_err(err[1]);
    SpawnStdio stdio;
    stdio.in = child_in.get();
    stdio.out = SpawnStdio::kDevNull;
    stdio.err = child_err.get();
    // The files become the launcher user's; their modes (0600) are kept.
    const int rc = SpawnInOwnGroup({"tar", "-x", "-f", "-", "--no-same-owner", "-C", dest}, stdio, &pid_);
    if (rc != 0) return absl::UnavailableError(absl::StrCat("cannot run tar here: ", strerror(rc)));
    return absl::OkStatus();
  }
  // False once tar is gone (it failed: Finish says why).
  bool Write(const char* data, size_t n) {
    while (n > 0 && in_.valid()) {
      const ssize_t w = write(in_.get(), data, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      data += w;
      n -= static_cast<size_t>(w);
    }
    return in_.valid();
  }
  // Ends its input and waits for it.
  absl::Status Finish() {
    in_.reset();
    std::string complaint;
    char buf[4096];
    for (ssize_t r; (r = read(err_.get(), buf, sizeof buf)) != 0;) {
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) break;
      if (complaint.size() < 4096) complaint.append(buf, static_cast<size_t>(r));
    }
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
    return absl::InternalError(absl::StrCat("tar here: ", complaint.empty() ? "failed" : FirstLine(complaint)));
  }
  ~LocalExtract() {
    if (pid_ > 0) {
      kill(-pid_, SIGKILL);
      while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }

 private:
  pid_t pid_ = -1;
  UniqueFd in_, err_;
};

}  // namespace

std::string TarCommand(const std::string& dir) { return absl::StrCat("tar -C ", ShellQuote(dir), " -cf - ."); }

std::vector<std::string> TarArgv(const std::string& dir) { return {"tar", "-C", dir, "-cf", "-", "."}; }

void HostLogCopy::Run() {
  for (Item& item : items_) item.result = CopyOne(item);
}

void HostLogCopy::Abort(const std::string& why) {
  std::shared_ptr<RemoteProcess> p;
  {
    MutexLock lock(&mu_);
    if (aborted_.empty()) aborted_ = why;
    p = proc_;
  }
  if (p) p->Abort();
}

// The remote tar's stdout into a local tar; either one's failure is the copy's.
absl::Status HostLogCopy::CopyOne(Item& item) {
  {
    MutexLock lock(&mu_);
    if (!aborted_.empty()) return absl::CancelledError(aborted_);
  }
  LocalExtract extract;
  if (absl::Status st = extract.Start(item.local_dir); !st.ok()) return st;
  absl::StatusOr<std::unique_ptr<RemoteProcess>> started = start_(item.remote_dir);
  if (!started.ok()) return started.status();
  std::shared_ptr<RemoteProcess> proc(std::move(*started));
  {
    MutexLock lock(&mu_);
    if (!aborted_.empty()) return absl::CancelledError(aborted_);
    proc_ = proc;
  }
  proc->Stop();  // the remote tar reads nothing
  std::string remote_err;
  bool local_failed = false;
  RemoteProcess::Outcome o = proc->Run([&](int stream, const char* data, size_t n) {
    if (stream == 2) {
      if (remote_err.size() < 4096) remote_err.append(data, n);
      return;
    }
    item.bytes += n;
    bytes_ += n;
    if (!local_failed && !extract.Write(data, n)) {
      local_failed = true;
      proc->Abort();
    }
  });
  std::string aborted;
  {
    MutexLock lock(&mu_);
    proc_.reset();
    aborted = aborted_;
  }
  // The first failure is the reason: a local tar that stopped taking bytes,
  // else the remote side (a local tar given nothing complains only of that).
  absl::Status local = extract.Finish();
  if (!local.ok() && local_failed) return local;
  if (!o.error.empty()) {
    return aborted.empty() ? absl::UnavailableError(o.error) : absl::CancelledError(aborted);
  }
  if (o.exit_status != 0) {
    return absl::UnavailableError(absl::StrCat(
        "tar there ", o.exit_signal.empty() ? absl::StrCat("exited with status ", o.exit_status)
                                            : absl::StrCat("was killed by SIG", o.exit_signal),
        remote_err.empty() ? "" : ": ", FirstLine(remote_err)));
  }
  return local;
}

int RunLogCopies(const std::vector<std::unique_ptr<HostLogCopy>>& copies, int sig_fd) {
  Mailbox<size_t> finished;  // the index of each copy that ended
  std::vector<std::thread> threads;
  for (size_t i = 0; i < copies.size(); ++i) {
    threads.emplace_back([c = copies[i].get(), i, &finished] {
      c->Run();
      finished.Post(i);
    });
  }
  struct Watch {
    uint64_t bytes = 0;
    TimePoint since;
  };
  std::vector<Watch> watch(copies.size(), Watch{0, Clock::now()});
  size_t done = 0;
  int signal_seen = 0;
  PollSet set;
  set.Add(finished.fd(), POLLIN, [&](short) { done += finished.TakeAll().size(); });
  set.Add(sig_fd, POLLIN, [&](short) {
    DrainSignalFd(sig_fd, [&](int sig, const signalfd_siginfo&) { signal_seen = sig; });
    for (const auto& c : copies) c->Abort(absl::StrCat("stopped by ", SignalName(signal_seen)));
  });
  while (done < copies.size()) {
    // Progress has no event of its own: looked at once a second.
    set.Poll(Clock::now() + std::chrono::seconds(1));
    const TimePoint now = Clock::now();
    for (size_t i = 0; i < copies.size(); ++i) {
      const uint64_t b = copies[i]->bytes();
      if (b != watch[i].bytes) watch[i] = Watch{b, now};
      if (now - watch[i].since >= kStallBound) {
        copies[i]->Abort(absl::StrCat("nothing came for ", DurationToSeconds(kStallBound), " s"));
      }
    }
  }
  for (std::thread& t : threads) t.join();
  return signal_seen;
}

namespace {

// The copies to make: one HostLogCopy per host with directories this machine
// does not see, and for each item the report it answers for. A node that
// cannot be copied at all gets its reason and a line.
struct Plan {
  std::vector<std::unique_ptr<HostLogCopy>> copies;
  std::vector<std::vector<v1::NodeReport*>> nodes;  // by copy, by item
  std::vector<std::string> lines;
  std::vector<std::string> stay;  // HOST:DIR of every node's logs not collected
};

Plan PlanCopies(const LogCollection& c, const std::vector<LogHost>& hosts, std::vector<v1::NodeReport>* nodes) {
  Plan plan;
  std::map<std::string, const LogHost*> known;
  for (const LogHost& h : hosts) known.emplace(h.name, &h);
  struct HostItems {
    std::vector<HostLogCopy::Item> items;
    std::vector<v1::NodeReport*> nodes;
  };
  std::map<std::string, HostItems> by_host;
  for (v1::NodeReport& n : *nodes) {
    const bool ours = known.count(n.host()) != 0;
    const LogLayout::Collection where =
        LogLayout::PlanCollection(n, c.run_dir, ours ? "" : "not a host of this job");
    switch (where.kind) {
      case LogLayout::Collection::Kind::kNoLogs:
        break;
      case LogLayout::Collection::Kind::kHere:
        n.set_logs_collected_to(where.dir);
        break;
      case LogLayout::Collection::Kind::kStays:
        n.set_logs_not_collected(where.why);
        plan.lines.push_back(absl::StrCat(n.host(), ": its logs were not collected (", where.why,
                                          "); they stay at ", n.host(), ":", n.log_dir()));
        plan.stay.push_back(absl::StrCat(n.host(), ":", n.log_dir()));
        break;
      case LogLayout::Collection::Kind::kCopy:
        by_host[n.host()].items.push_back(HostLogCopy::Item{n.log_dir(), where.dir, absl::OkStatus(), 0});
        by_host[n.host()].nodes.push_back(&n);
        break;
    }
  }
  for (auto& [name, h] : by_host) {
    plan.copies.push_back(std::make_unique<HostLogCopy>(name, std::move(h.items), known[name]->start));
    plan.nodes.push_back(std::move(h.nodes));
  }
  return plan;
}

// Where each copy went, into its node's report; one line for each that failed.
void RecordCopies(Plan* plan, uint64_t* bytes, int* whole_hosts) {
  for (size_t c = 0; c < plan->copies.size(); ++c) {
    const HostLogCopy& copy = *plan->copies[c];
    bool whole = true;
    for (size_t i = 0; i < copy.items().size(); ++i) {
      const HostLogCopy::Item& item = copy.items()[i];
      *bytes += item.bytes;
      if (item.result.ok()) {
        plan->nodes[c][i]->set_logs_collected_to(item.local_dir);
        continue;
      }
      whole = false;
      plan->nodes[c][i]->set_logs_not_collected(std::string(item.result.message()));
      const bool left_part = rmdir(item.local_dir.c_str()) != 0;  // an empty copy goes
      plan->lines.push_back(absl::StrCat(copy.host(), ": its logs were not collected (", item.result.message(),
                                         "); they stay at ", copy.host(), ":", item.remote_dir,
                                         left_part ? absl::StrCat("; what came is in ", item.local_dir) : ""));
      plan->stay.push_back(absl::StrCat(copy.host(), ":", item.remote_dir));
    }
    *whole_hosts += whole ? 1 : 0;
  }
}

std::string Amount(uint64_t bytes) {
  if (bytes < 1024) return Count(bytes, "byte");
  if (bytes < (1u << 20)) return absl::StrFormat("%.1f KiB", bytes / 1024.0);
  return absl::StrFormat("%.1f MiB", bytes / 1048576.0);
}

// One line for each host with an agent that was killed or lost: it sent no
// report, so its directory is not known here.
void UnreportedLogs(const LogCollection& c, const std::vector<LogHost>& hosts,
                    const std::vector<v1::NodeReport>& nodes, Plan* plan) {
  std::map<std::string, int> reported;
  for (const v1::NodeReport& n : nodes) {
    if (!n.log_dir().empty()) reported[n.host()]++;
  }
  for (const LogHost& h : hosts) {
    const int missing = h.joins - reported[h.name];
    if (missing <= 0) continue;
    plan->lines.push_back(absl::StrCat(h.name, ": ", missing == 1 ? "an agent" : absl::StrCat(missing, " agents"),
                                       " ended without saying where ", missing == 1 ? "its" : "their",
                                       " logs are (killed or lost); they stay on ", h.name, " under ", c.run_dir,
                                       "/"));
    plan->stay.push_back(absl::StrCat(h.name, ":", c.run_dir, "/"));
  }
}

}  // namespace

int CollectLogs(const LogCollection& c, const std::vector<LogHost>& hosts, std::vector<v1::NodeReport>* nodes,
                std::vector<std::string>* stay) {
  Plan plan = PlanCopies(c, hosts, nodes);
  const TimePoint t0 = Clock::now();
  if (c.dropped) {
    for (auto& copy : plan.copies) copy->Abort("the job's connections were dropped; nothing was copied");
  }
  const int sig = plan.copies.empty() ? 0 : RunLogCopies(plan.copies, c.sig_fd);
  const double seconds = DurationToSeconds(Clock::now() - t0);
  uint64_t bytes = 0;
  int whole = 0;
  RecordCopies(&plan, &bytes, &whole);
  UnreportedLogs(c, hosts, *nodes, &plan);
  const int n = static_cast<int>(plan.copies.size());
  const std::string what =
      n == 0 ? "a file system the hosts share with this machine: nothing copied"
             : absl::StrCat(Amount(bytes), " copied from ",
                            whole == n ? "" : absl::StrCat(whole, " of "), n, " host", n == 1 ? "" : "s",
                            " in ", absl::StrFormat("%.1f", seconds), " s");
  if (!c.quiet || !plan.lines.empty()) {
    c.say(absl::StrCat("logs of every host: ", c.run_dir, "/ (", what,
                       plan.lines.empty() ? ")" : absl::StrCat("; ", plan.lines.size(), " not collected, below)")));
  }
  for (const std::string& l : plan.lines) c.say(l);
  if (stay) *stay = std::move(plan.stay);
  return sig;
}

}  // namespace drun

#include "agent/worker_group.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace drun {

std::string ReadErrorFileMessage(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  google::protobuf::Struct doc;
  if (!google::protobuf::util::JsonStringToMessage(ss.str(), &doc).ok()) return "";
  auto it = doc.fields().find("message");
  if (it == doc.fields().end()) return "";
  const auto& v = it->second;
  if (v.has_string_value()) return v.string_value();
  if (v.has_struct_value()) {
    auto inner = v.struct_value().fields().find("message");
    if (inner != v.struct_value().fields().end() && inner->second.has_string_value()) {
      return inner->second.string_value();
    }
  }
  return "";
}

WorkerGroup::WorkerGroup(Guardian* guardian, Console* console)
    : guardian_(guardian), console_(console) {}

WorkerGroup::~WorkerGroup() {
  for (auto& w : workers_) {
    if (w->pid > 0 && !w->group_gone) kill(-w->pid, SIGKILL);
    CloseStreams(*w);
  }
}

absl::Status WorkerGroup::Start(std::vector<WorkerLaunch> launches, TimePoint now) {
  for (auto& launch : launches) {
    auto w = std::make_unique<Worker>();
    w->launch = std::move(launch);
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe");
    if (pipe2(err, O_CLOEXEC) != 0) {
      close(out[0]);
      close(out[1]);
      return absl::ErrnoToStatus(errno, "pipe");
    }
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    w->out_fd = out[0];
    w->err_fd = err[0];
    auto open_log = [](const std::string& path) {
      return path.empty() ? -1 : open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    };
    w->out_file = open_log(w->launch.stdout_file);
    w->err_file = open_log(w->launch.stderr_file);
    SpawnRequest req = w->launch.request;
    req.stdout_fd = out[1];
    req.stderr_fd = err[1];
    absl::StatusOr<pid_t> pid = SpawnProcessGroup(req);
    close(out[1]);
    close(err[1]);
    if (!pid.ok()) {
      CloseStreams(*w);
      Stop(SIGKILL, now, Duration::zero());
      return pid.status();
    }
    w->pid = *pid;
    w->start = now;
    guardian_->Watch(w->pid);
    workers_.push_back(std::move(w));
  }
  return absl::OkStatus();
}

void WorkerGroup::AppendPollFds(std::vector<pollfd>* fds) const {
  for (const auto& w : workers_) {
    if (w->out_fd >= 0) fds->push_back({w->out_fd, POLLIN, 0});
    if (w->err_fd >= 0) fds->push_back({w->err_fd, POLLIN, 0});
  }
}

void WorkerGroup::Emit(Worker& w, bool is_err, absl::string_view line) {
  const int file = is_err ? w.err_file : w.out_file;
  if (file >= 0) {
    WriteAll(file, line);
    WriteAll(file, "\n");
  }
  if (is_err) w.tail.Add(line);
  if (is_err ? w.launch.console_stderr : w.launch.console_stdout) {
    console_->Line(is_err ? 2 : 1, w.launch.prefix, line, w.launch.colour);
  }
}

bool WorkerGroup::ReadStream(Worker& w, bool is_err, int max_reads) {
  int& fd = is_err ? w.err_fd : w.out_fd;
  LineSplitter& split = is_err ? w.err_split : w.out_split;
  char buf[65536];
  for (int i = 0; i < max_reads && fd >= 0; ++i) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      split.Feed(absl::string_view(buf, static_cast<size_t>(n)),
                 [&](absl::string_view line) { Emit(w, is_err, line); });
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return false;
    // EOF or error: the last line may lack its newline.
    split.Flush([&](absl::string_view line) { Emit(w, is_err, line); });
    close(fd);
    fd = -1;
  }
  return fd >= 0;
}

void WorkerGroup::Drain(Worker& w, bool is_err) {
  while (ReadStream(w, is_err, 1 << 20)) {
  }
  int& fd = is_err ? w.err_fd : w.out_fd;
  if (fd >= 0) {
    (is_err ? w.err_split : w.out_split).Flush([&](absl::string_view l) { Emit(w, is_err, l); });
    close(fd);
    fd = -1;
  }
}

void WorkerGroup::OnReadable(int fd) {
  for (auto& w : workers_) {
    // Bounded per call so one chatty worker cannot starve the others.
    if (fd == w->out_fd) return (void)ReadStream(*w, false, 16);
    if (fd == w->err_fd) return (void)ReadStream(*w, true, 16);
  }
}

void WorkerGroup::CloseStreams(Worker& w) {
  for (int* fd : {&w.out_fd, &w.err_fd, &w.out_file, &w.err_file}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

void WorkerGroup::CheckGroup(Worker& w) {
  if (!w.exited || w.group_gone) return;
  if (kill(-w.pid, 0) == 0 || errno != ESRCH) return;
  w.group_gone = true;
  guardian_->Forget(w.pid);
  // Everything the group wrote is in the pipes now; a process that escaped
  // with setsid may still hold them open, so drain and close rather than wait
  // for EOF.
  Drain(w, false);
  Drain(w, true);
  CloseStreams(w);
}

bool WorkerGroup::OnChildExit(pid_t pid, int status, long maxrss_kb, TimePoint now) {
  for (auto& wp : workers_) {
    Worker& w = *wp;
    if (w.pid != pid || w.exited) continue;
    w.exited = true;
    w.status = status;
    w.end = now;
    w.maxrss_kb = maxrss_kb;
    // Leftovers in the worker's group are orphans of a finished worker.
    kill(-w.pid, SIGKILL);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && !stopping_ && !first_failure_) {
      // Drain what it wrote so the stderr tail includes its last words.
      ReadStream(w, false, 1 << 20);
      ReadStream(w, true, 1 << 20);
      w.err_split.Flush([&](absl::string_view l) { Emit(w, true, l); });
      WorkerExit e;
      e.local_rank = w.launch.local_rank;
      e.rank = w.launch.rank;
      e.pid = w.pid;
      e.when = now;
      if (WIFSIGNALED(status)) {
        e.signal = WTERMSIG(status);
        e.exit_code = 128 + e.signal;
      } else {
        e.exit_code = WEXITSTATUS(status);
      }
      e.stderr_tail = w.tail.lines();
      e.error_message = ReadErrorFileMessage(w.launch.error_file);
      first_failure_ = std::move(e);
    }
    CheckGroup(w);
    return true;
  }
  return false;
}

void WorkerGroup::Sweep() {
  for (auto& w : workers_) CheckGroup(*w);
}

void WorkerGroup::Forward(int sig) {
  for (auto& w : workers_) {
    if (w->pid > 0 && !w->group_gone) kill(-w->pid, sig);
  }
}

void WorkerGroup::Stop(int sig, TimePoint now, Duration grace) {
  if (!stopping_) {
    stopping_ = true;
    kill_at_ = now + grace;
  } else if (kill_at_ && now + grace < *kill_at_) {
    kill_at_ = now + grace;
  }
  Forward(sig);
  if (grace <= Duration::zero()) KillNow();
}

void WorkerGroup::KillNow() {
  Forward(SIGKILL);
  kill_at_.reset();
}

void WorkerGroup::OnTick(TimePoint now) {
  if (kill_at_ && now >= *kill_at_) KillNow();
}

std::optional<TimePoint> WorkerGroup::NextDeadline() const {
  if (done()) return std::nullopt;
  return kill_at_;
}

bool WorkerGroup::done() const {
  for (const auto& w : workers_) {
    if (!w->group_gone || w->out_fd >= 0 || w->err_fd >= 0) return false;
  }
  return true;
}

bool WorkerGroup::all_succeeded() const {
  for (const auto& w : workers_) {
    if (!w->exited || !WIFEXITED(w->status) || WEXITSTATUS(w->status) != 0) return false;
  }
  return true;
}

std::vector<WorkerRecord> WorkerGroup::records() const {
  std::vector<WorkerRecord> out;
  for (const auto& w : workers_) {
    WorkerRecord r;
    r.local_rank = w->launch.local_rank;
    r.rank = w->launch.rank;
    r.pid = w->pid;
    r.start = w->start;
    r.end = w->end;
    r.exited = w->exited;
    if (w->exited) {
      if (WIFSIGNALED(w->status)) {
        r.signal = WTERMSIG(w->status);
        r.exit_code = 128 + r.signal;
      } else {
        r.exit_code = WEXITSTATUS(w->status);
      }
    }
    r.peak_rss_kb = w->maxrss_kb;
    out.push_back(r);
  }
  return out;
}

std::vector<pid_t> WorkerGroup::pids() const {
  std::vector<pid_t> out;
  for (const auto& w : workers_) out.push_back(w->pid);
  return out;
}

}  // namespace drun

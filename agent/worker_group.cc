#include "agent/worker_group.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "rendezvous/base/private_files.h"
#include "rendezvous/base/exit_code.h"
#include "rendezvous/base/words.h"

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

namespace {

// Bigger pipes mean fewer wake-ups and system calls per megabyte: a worker's
// 1 MB write fits at once and drun moves it in one call. Pipe pages count
// against the user's pipe-user-pages-soft (64 MiB by default, shared with
// everything the user runs, the workers' own pipes included; past it new
// pipes get 8 KiB), so drun's pipes share a budget of kPipeBudget.
constexpr size_t kMaxPipeSize = 1 << 20;
constexpr size_t kMinPipeSize = 64 * 1024;
constexpr size_t kPipeBudget = 16 << 20;
constexpr size_t kReadSize = kMaxPipeSize;

size_t PipeSizeFor(size_t streams) {
  size_t size = kMaxPipeSize;
  while (size > kMinPipeSize && size * streams > kPipeBudget) size /= 2;
  return size;
}

// Descriptors this process holds now (/proc/self/fd, less the one reading it).
int OpenDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n - 1;
}

// A descriptor limit that has room for `need` descriptors.
rlim_t RoomyLimit(int need) {
  rlim_t limit = 4096;
  while (limit < static_cast<rlim_t>(2 * need)) limit *= 2;
  return limit;
}

}  // namespace

absl::Status ExplainDescriptorShortage(const absl::Status& failed, const DescriptorCount& count) {
  rlimit lim{};
  if (!absl::IsResourceExhausted(failed) || count.base < 0 || getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    return failed;
  }
  // The one being started holds its child's three ends too.
  const int need = count.base + static_cast<int>(count.workers) * count.per_worker + 3;
  if (lim.rlim_cur == RLIM_INFINITY || static_cast<rlim_t>(need) <= lim.rlim_cur) return failed;
  const rlim_t want = RoomyLimit(need);
  std::string fix = absl::StrCat("raise it (ulimit -n ", want, ")");
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < static_cast<rlim_t>(need)) {
    fix = absl::StrCat("its hard limit is ", lim.rlim_max, ": raise that (limits.conf, or Slurm's ",
                       "PropagateResourceLimits) or run fewer workers per node");
  } else if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < want) {
    fix = absl::StrCat("raise it (ulimit -n ", lim.rlim_max, ")");
  }
  return absl::ResourceExhaustedError(absl::StrCat(Count(count.workers, "worker"), " need about ", need,
                                                   " descriptors; ulimit -n is ", lim.rlim_cur, ": ",
                                                   fix, " (", failed.message(), ")"));
}

WorkerGroup::WorkerGroup(Guardian* guardian, Console* console)
    : guardian_(guardian), console_(console), buf_(new char[kReadSize]) {}

WorkerGroup::~WorkerGroup() {
  for (auto& w : workers_) {
    if (w->pid > 0 && !w->group_gone) kill(-w->pid, SIGKILL);
  }
  pumps_.clear();  // joins them; normally every stream ended already
  for (auto& w : workers_) CloseStreams(*w);
}

void WorkerGroup::MakePumps(const std::vector<WorkerLaunch>& launches) {
  size_t logs = 0;
  for (const auto& l : launches) logs += (l.stdout_file.empty() ? 0 : 1) + (l.stderr_file.empty() ? 0 : 1);
  // As many threads as cores, at most one per log: the copy into the page
  // cache is the cost, and it scales with cores.
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 0; i < std::min(logs, cores); ++i) pumps_.push_back(std::make_unique<LogPump>());
}

absl::Status WorkerGroup::PumpStream(Stream& st, bool loop_reads, size_t pipe_size) {
  // stdout logs from the first pump on, stderr logs from the last one back,
  // so the (usually heavier) stdout logs spread over every pump.
  const size_t n = pumps_.size();
  LogPump* pump = st.is_err ? pumps_[n - 1 - next_err_pump_++ % n].get()
                            : pumps_[next_out_pump_++ % n].get();
  UniqueFd pump_end;
  if (loop_reads) {
    // This loop reads the worker's pipe; what it reads it first tee(2)s
    // (no copy) into the pump's own pipe.
    if (!MakePipe(&pump_end, &st.log_pipe)) return absl::ErrnoToStatus(errno, "pipe");
    fcntl(pump_end.get(), F_SETFL, O_NONBLOCK);
    fcntl(st.log_pipe.get(), F_SETFL, O_NONBLOCK);
    fcntl(st.log_pipe.get(), F_SETPIPE_SZ, static_cast<int>(pipe_size));  // may be refused: speed only
  } else {
    pump_end = std::move(st.fd);  // the pump alone reads the worker's pipe
    st.pump_reads = true;
  }
  st.pump_id = pump->Add(std::move(pump_end), std::move(st.file));
  st.pump = pump;
  st.pumping = true;
  return absl::OkStatus();
}

void WorkerGroup::OnPumpEvents(LogPump* pump) {
  for (const LogPump::Event& e : pump->TakeEvents()) {
    for (auto& w : workers_) {
      for (Stream* st : {&w->out, &w->err}) {
        if (st->pump != pump || st->pump_id != e.id) continue;
        if (e.error != 0) LogFailed(*st, e.error);
        if (e.ended) {
          st->pumping = false;
          if (!st->log_pipe) CloseStream(*st);  // the pump read the worker's pipe: it is done
        }
      }
    }
  }
}

absl::Status WorkerGroup::OpenStreams(Worker& w, size_t pipe_size, ChildEnds* ends) {
  for (Stream* st : {&w.out, &w.err}) {
    UniqueFd* child_end = st->is_err ? &ends->err : &ends->out;
    if (!MakePipe(&st->fd, child_end)) return absl::ErrnoToStatus(errno, "pipe");
    fcntl(st->fd.get(), F_SETFL, O_NONBLOCK);
    // The kernel may refuse (the user is past the soft limit): it only costs speed.
    fcntl(st->fd.get(), F_SETPIPE_SZ, static_cast<int>(pipe_size));
    st->path = st->is_err ? w.launch.stderr_file : w.launch.stdout_file;
    if (!st->path.empty()) {
      st->file.reset(open(st->path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kPrivateFileMode));
      if (!st->file) {
        // Checked before the job started; a failure now is a disk that went away.
        console_->Text(absl::StrCat("drun: warning: cannot open the log ", st->path, ": ",
                                    strerror(errno), "; this stream goes to the console only\n"));
        incomplete_logs_.push_back(st->path);
      }
    }
    const bool shown = st->is_err ? w.launch.console_stderr : w.launch.console_stdout;
    if (shown) {
      st->console_id = console_->AddSource(st->is_err ? 2 : 1, w.launch.prefix,
                                           w.launch.cont_prefix, w.launch.colour, st->file.valid());
    }
    // A pump thread writes the log. This loop reads the bytes too when the
    // console shows them or, for stderr, to keep the tail for the root cause.
    if (st->file && !pumps_.empty()) {
      const bool on_screen = shown && !console_->discards(st->is_err ? 2 : 1);
      absl::Status pumped = PumpStream(*st, on_screen || st->is_err, pipe_size);
      if (!pumped.ok()) return pumped;
    }
  }
  if (w.launch.reads_drun_stdin) {
    if (!MakePipe(&ends->in, &w.stdin_fd)) return absl::ErrnoToStatus(errno, "pipe");
    fcntl(w.stdin_fd.get(), F_SETFL, O_NONBLOCK);
  } else {
    ends->in.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!ends->in) return absl::ErrnoToStatus(errno, "open /dev/null");
  }
  return absl::OkStatus();
}

absl::Status WorkerGroup::Start(std::vector<WorkerLaunch> launches, TimePoint now) {
  MakePumps(launches);
  // Each stream's pipe, and the pump's pipe for a log this loop reads too.
  const size_t pipe_size = PipeSizeFor(4 * launches.size());
  absl::Status status = absl::OkStatus();
  // For a start that runs out of descriptors: what the first worker took.
  DescriptorCount fds;
  fds.workers = launches.size();
  fds.base = OpenDescriptors();
  fds.per_worker = EstimatedDescriptors(launches.empty() ? WorkerLaunch() : launches[0]);
  for (auto& launch : launches) {
    auto w = std::make_unique<Worker>();
    w->launch = std::move(launch);
    w->err.is_err = true;
    SpawnRequest req = w->launch.request;
    absl::StatusOr<pid_t> pid;
    {
      ChildEnds ends;  // closed in drun at the end of this block, spawned or not
      absl::Status opened = OpenStreams(*w, pipe_size, &ends);
      req.stdin_fd = ends.in.get();
      req.stdout_fd = ends.out.get();
      req.stderr_fd = ends.err.get();
      pid = opened.ok() ? SpawnProcessGroup(req) : absl::StatusOr<pid_t>(opened);
    }
    if (!pid.ok()) {
      CloseStreams(*w);
      status = ExplainDescriptorShortage(pid.status(), fds);
      break;
    }
    if (workers_.empty() && fds.base >= 0) fds.per_worker = std::max(1, OpenDescriptors() - fds.base);
    w->pid = *pid;
    w->start = now;
    w->last_output = now;
    guardian_->Watch(w->pid);
    workers_.push_back(std::move(w));
  }
  // Started even when a spawn failed: the workers already running are
  // drained until they are gone.
  for (auto& pump : pumps_) {
    absl::Status started = pump->Start();
    if (started.ok()) continue;
    if (status.ok()) status = started;
    for (auto& w : workers_) {  // nobody will write these logs: give them up
      for (Stream* st : {&w->out, &w->err}) {
        if (st->pump != pump.get()) continue;
        st->pumping = false;
        if (st->log_pipe) {
          st->log_pipe.reset();
        } else {
          CloseStream(*st);
        }
        incomplete_logs_.push_back(st->path);
      }
    }
  }
  if (!status.ok()) Stop(SIGKILL, Duration::zero());
  return status;
}

void WorkerGroup::AppendPollFds(std::vector<pollfd>* fds) const {
  // A console that cannot keep up throttles the streams it alone shows;
  // streams with a log file go on (the console drops their lines).
  const bool congested = console_->congested();
  for (const auto& w : workers_) {
    for (const Stream* st : {&w->out, &w->err}) {
      if (!st->fd || (congested && st->console_id >= 0 && !st->has_log())) continue;
      // A full pump pipe (the disk is slower than the worker): wait for room.
      if (st->log_full) {
        fds->push_back({st->log_pipe.get(), POLLOUT, 0});
      } else {
        fds->push_back({st->fd.get(), POLLIN, 0});
      }
    }
    if (w->stdin_fd && !w->stdin_pending.empty()) fds->push_back({w->stdin_fd.get(), POLLOUT, 0});
  }
  for (const auto& pump : pumps_) fds->push_back({pump->wake_fd(), POLLIN, 0});
}

void WorkerGroup::LogFailed(Stream& st, int err) {
  console_->Text(absl::StrCat("drun: warning: cannot write the log ", st.path, ": ", strerror(err),
                              "; it is incomplete from here, the console goes on\n"));
  incomplete_logs_.push_back(st.path);
  st.file.reset();
}

void WorkerGroup::Deliver(Worker& w, Stream& st, absl::string_view data) {
  if (st.file) {
    if (int err = WriteAll(st.file.get(), data); err != 0) LogFailed(st, err);
  }
  if (st.is_err) w.tail.Add(data);
  w.last_line.Add(data);
  if (st.console_id >= 0) console_->Write(st.console_id, data);
}

int WorkerGroup::TeeToPump(Stream& st) {
  ssize_t n = tee(st.fd.get(), st.log_pipe.get(), kReadSize, SPLICE_F_NONBLOCK);
  if (n >= 0) return static_cast<int>(n);  // 0: end-of-file
  if (errno == EINTR) return -1;
  if (errno == EAGAIN) {
    // Either the worker's pipe is empty or the pump's is full: ask the former.
    int queued = 0;
    ioctl(st.fd.get(), FIONREAD, &queued);
    st.log_full = queued > 0;
    if (!st.log_full && st.draining) CloseStream(st);  // drained: see Drain()
    return -2;
  }
  // The pump's pipe broke (it cannot happen while the stream lives): the
  // console goes on alone, the log is incomplete.
  st.log_pipe.reset();
  incomplete_logs_.push_back(st.path);
  return -1;
}

void WorkerGroup::CloseStream(Stream& st) {
  st.fd.reset();
  st.log_pipe.reset();  // the pump reaches end-of-file and ends the log
  st.log_full = false;
  console_->RemoveSource(st.console_id);  // shows a last line that lacks its newline
  st.console_id = -1;
}

bool WorkerGroup::ReadStream(Worker& w, Stream& st, int max_reads) {
  for (int i = 0; i < max_reads && st.fd; ++i) {
    // With a pump's pipe, read exactly what was tee'd into it, so the log
    // and the console get the same bytes.
    size_t want = kReadSize;
    if (st.log_pipe) {
      const int teed = TeeToPump(st);
      if (teed == -1) continue;
      if (teed == -2) return false;
      want = teed == 0 ? 1 : static_cast<size_t>(teed);  // 0: read sees the end-of-file too
    }
    ssize_t n = read(st.fd.get(), buf_.get(), want);
    while (st.log_pipe && n > 0 && static_cast<size_t>(n) < want) {
      // The pipe holds all `want` bytes, so one read takes them; never leave
      // a tee'd byte unread (the next tee would give the log it twice).
      ssize_t more = read(st.fd.get(), buf_.get() + n, want - static_cast<size_t>(n));
      if (more > 0) n += more;
      if (more == 0 || (more < 0 && errno != EINTR)) break;
    }
    if (n > 0) {
      w.output_bytes += static_cast<std::uint64_t>(n);
      Deliver(w, st, absl::string_view(buf_.get(), static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (st.draining) CloseStream(st);
      return false;
    }
    CloseStream(st);  // end-of-file or error
  }
  return st.fd.valid();
}

void WorkerGroup::Drain(Worker& w, Stream& st) {
  if (st.pumping && !st.fd) {
    // The pump alone reads this pipe: it drains it and ends the stream.
    if (!st.finish_sent) st.pump->Finish(st.pump_id);
    st.finish_sent = true;
    return;
  }
  // What the pipe holds now is read, then the stream closes. A full pump
  // pipe makes this wait in the loop (the stream stays polled) until the
  // pump has made room.
  st.draining = true;
  while (ReadStream(w, st, 1 << 20)) {
  }
  if (!st.log_full) CloseStream(st);
}

void WorkerGroup::OnReady(int fd, short revents) {
  for (auto& pump : pumps_) {
    if (fd == pump->wake_fd()) return OnPumpEvents(pump.get());
  }
  for (auto& w : workers_) {
    for (Stream* st : {&w->out, &w->err}) {
      if (st->log_full && fd == st->log_pipe.get()) {
        st->log_full = false;  // the pump made room
        return (void)ReadStream(*w, *st, 16);
      }
    }
    // Bounded per call so one chatty worker cannot starve the others.
    if (fd == w->out.fd.get()) return (void)ReadStream(*w, w->out, 16);
    if (fd == w->err.fd.get()) return (void)ReadStream(*w, w->err, 16);
    if (fd == w->stdin_fd.get()) {
      if (revents & (POLLERR | POLLHUP)) w->stdin_pending.clear();  // the reader is gone
      return WriteStdin(*w);
    }
  }
}

void WorkerGroup::WriteStdin(Worker& w) {
  while (w.stdin_fd && !w.stdin_pending.empty()) {
    ssize_t n = write(w.stdin_fd.get(), w.stdin_pending.data(), w.stdin_pending.size());
    if (n > 0) {
      w.stdin_pending.erase(0, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {
      w.stdin_pending.clear();  // EPIPE: the worker closed its stdin or exited
    }
  }
  if (w.stdin_fd && w.stdin_end && w.stdin_pending.empty()) w.stdin_fd.reset();
}

bool WorkerGroup::WantsStdin() const {
  bool any = false;
  for (const auto& w : workers_) {
    if (!w->stdin_fd) continue;
    if (!w->stdin_pending.empty()) return false;
    any = true;
  }
  return any;
}

void WorkerGroup::FeedStdin(absl::string_view data) {
  for (auto& w : workers_) {
    if (!w->stdin_fd) continue;
    w->stdin_pending.append(data.data(), data.size());
    WriteStdin(*w);
  }
}

void WorkerGroup::EndStdin() {
  for (auto& w : workers_) {
    w->stdin_end = true;
    WriteStdin(*w);
  }
}

void WorkerGroup::CloseStreams(Worker& w) {
  for (Stream* st : {&w.out, &w.err}) {
    CloseStream(*st);
    st->file.reset();
  }
  w.stdin_fd.reset();
}

void WorkerGroup::CheckGroup(Worker& w) {
  if (!w.exited || w.group_gone) return;
  if (kill(-w.pid, 0) == 0 || errno != ESRCH) return;
  w.group_gone = true;
  guardian_->Forget(w.pid);
  // Everything the group wrote is in the pipes now; a process that escaped
  // with setsid may still hold them open, so drain and close rather than wait
  // for EOF.
  Drain(w, w.out);
  Drain(w, w.err);
  w.out.file.reset();
  w.err.file.reset();
  w.stdin_fd.reset();
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
    if (stopping_ && WIFSIGNALED(status)) {
      const int sig = WTERMSIG(status);
      w.stopped_by_drun = (stop_signal_ != 0 && sig == stop_signal_) || (killed_ && sig == SIGKILL);
    }
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && !stopping_ && !first_failure_) {
      // Drain what it wrote so the stderr tail includes its last words.
      ReadStream(w, w.out, 1 << 20);
      ReadStream(w, w.err, 1 << 20);
      WorkerExit e;
      e.local_rank = w.launch.local_rank;
      e.rank = w.launch.rank;
      e.pid = w.pid;
      e.when = now;
      if (WIFSIGNALED(status)) {
        e.signal = WTERMSIG(status);
        e.exit_code = ExitCodeForSignal(e.signal);
      } else {
        e.exit_code = WEXITSTATUS(status);
      }
      e.stderr_tail = w.tail.lines(20);
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

void WorkerGroup::Stop(int sig, Duration grace) {
  if (sig != 0) stop_signal_ = sig;
  stopping_ = true;
  Forward(sig);
  if (grace <= Duration::zero()) KillNow();
}

void WorkerGroup::KillNow() {
  killed_ = true;
  Forward(SIGKILL);
}

// Without a worker started to count: its pipes' ends, and per log file the
// file and its pump's pipe.
int WorkerGroup::EstimatedDescriptors(const WorkerLaunch& l) {
  return 3 + 3 * (!l.stdout_file.empty() + !l.stderr_file.empty());
}

std::uint64_t WorkerGroup::PrintedBytes(const Worker& w) const {
  std::uint64_t bytes = w.output_bytes;
  for (const Stream* st : {&w.out, &w.err}) {
    if (st->pump_reads) bytes += st->pump->moved(st->pump_id);  // bytes this loop never sees
  }
  return bytes;
}

void WorkerGroup::NoteOutput(TimePoint now) {
  bool pumped = false;
  for (auto& w : workers_) {
    if (w->exited) continue;
    const std::uint64_t bytes = PrintedBytes(*w);
    if (bytes != w->noted_bytes) {
      w->noted_bytes = bytes;
      w->last_output = now;
    }
    pumped = pumped || w->out.pump_reads || w->err.pump_reads;
  }
  // What only a pump reads wakes nobody: sample it each second.
  next_note_.reset();
  if (pumped) next_note_ = now + std::chrono::seconds(1);
}

std::vector<int> WorkerGroup::alive_ranks() const {
  std::vector<int> out;
  for (const auto& w : workers_) {
    if (w->launch.local_rank < 0 || w->exited) continue;  // the node-setup command, or reaped
    out.push_back(w->launch.rank >= 0 ? w->launch.rank : w->launch.local_rank);
  }
  return out;
}

bool WorkerGroup::done() const {
  for (const auto& w : workers_) {
    if (!w->group_gone || w->out.fd || w->err.fd || w->out.pumping || w->err.pumping) return false;
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
        r.exit_code = ExitCodeForSignal(r.signal);
      } else {
        r.exit_code = WEXITSTATUS(w->status);
      }
    }
    r.stopped_by_drun = w->stopped_by_drun;
    r.peak_rss_kb = w->maxrss_kb;
    out.push_back(r);
  }
  return out;
}

std::vector<WorkerGroup::Activity> WorkerGroup::activity() const {
  std::vector<Activity> out;
  for (const auto& w : workers_) {
    if (w->launch.local_rank < 0 || w->exited) continue;  // the node-setup command, or gone
    out.push_back({w->launch.local_rank, w->launch.rank, w->pid, PrintedBytes(*w), w->last_line.Get(),
                   w->last_output});
  }
  return out;
}

std::vector<pid_t> WorkerGroup::pids() const {
  std::vector<pid_t> out;
  for (const auto& w : workers_) out.push_back(w->pid);
  return out;
}

}  // namespace drun

#include "agent/process.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace drun {

absl::StatusOr<ProcStat> ParseProcStat(absl::string_view text) {
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) {
    return absl::DataLossError("malformed stat line");
  }
  ProcStat st;
  st.comm = std::string(text.substr(open + 1, close - open - 1));
  const std::vector<absl::string_view> f = absl::StrSplit(text.substr(close + 1), ' ', absl::SkipEmpty());
  // f[0] is field 3 (state); utime and stime are fields 14 and 15 (proc(5)).
  if (f.size() < 13 || f[0].empty()) return absl::DataLossError("short stat line");
  st.state = f[0][0];
  absl::SimpleAtoi(f[1], &st.ppid);
  uint64_t utime = 0, stime = 0;
  if (!absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return absl::DataLossError("bad cpu times in stat line");
  }
  static const long ticks = sysconf(_SC_CLK_TCK);
  st.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(ticks > 0 ? ticks : 100);
  return st;
}

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char buf[1024];
  const ssize_t n = read(fd.get(), buf, sizeof buf);
  if (n <= 0) return std::nullopt;
  absl::StatusOr<ProcStat> st = ParseProcStat(absl::string_view(buf, static_cast<size_t>(n)));
  if (!st.ok()) return std::nullopt;
  return *std::move(st);
}

std::string FindOnPath(const std::string& file, const std::string& path) {
  if (file.find('/') != std::string::npos) return file;
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", file);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

namespace {

// Only async-signal-safe calls between fork and exec.
[[noreturn]] void ChildFail(const char* what, const char* arg, int code) {
  const char* err = strerror(errno);
  const char* parts[] = {"drun: cannot start ", arg, ": ", what, ": ", err, "\n"};
  for (const char* p : parts) {
    ssize_t r = write(2, p, strlen(p));
    (void)r;
  }
  _exit(code);
}

}  // namespace

namespace {

// What the child needs, prepared before it exists: between clone and exec it
// makes system calls only, on its own stack.
struct ChildArgs {
  const SpawnRequest* req;
  const char* exe;  // empty: not found on PATH
  char** argv;
  char** envp;
  pid_t parent;
  const cpu_set_t* cpus;  // null: inherit drun's affinity
};

int ChildMain(void* p) {
  const ChildArgs& a = *static_cast<const ChildArgs*>(p);
  const SpawnRequest& req = *a.req;
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != a.parent) _exit(137);  // drun died before prctl took effect
  // Under Yama ptrace_scope 1 only an ancestor may ptrace a worker; the tools
  // drun stacks runs (eu-stack, gdb) are the agent's children, not the
  // workers' ancestors: name the agent as this process's ptracer, which
  // covers its descendants (the relation outlives execve). EINVAL without Yama.
  prctl(PR_SET_PTRACER, a.parent, 0, 0, 0);
  // Every signal is blocked here (see SpawnProcessGroup): reset dispositions
  // first, then unblock, so no handler of drun's ever runs in the child.
  for (int s = 1; s < NSIG; ++s) signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (req.stdin_fd >= 0 && dup2(req.stdin_fd, 0) < 0) ChildFail("dup2", a.argv[0], 127);
  if (req.stdout_fd >= 0 && dup2(req.stdout_fd, 1) < 0) ChildFail("dup2", a.argv[0], 127);
  if (req.stderr_fd >= 0 && dup2(req.stderr_fd, 2) < 0) ChildFail("dup2", a.argv[0], 127);
  if (a.cpus && sched_setaffinity(0, sizeof *a.cpus, a.cpus) != 0) {
    ChildFail("cannot set its CPU affinity (--numa-binding)", a.argv[0], 127);
  }
  if (!req.cwd.empty() && chdir(req.cwd.c_str()) != 0) {
    ChildFail("cannot change directory", req.cwd.c_str(), 127);
  }
  if (a.exe[0] == '\0') {
    errno = ENOENT;
    ChildFail("not found on PATH", a.argv[0], 127);
  }
  execve(a.exe, a.argv, a.envp);
  ChildFail("exec failed", a.exe, errno == ENOENT ? 127 : 126);
}

}  // namespace

absl::StatusOr<pid_t> SpawnProcessGroup(const SpawnRequest& req) {
  if (req.argv.empty()) return absl::InvalidArgumentError("empty command");
  // Everything the child needs is prepared before it exists.
  std::string path_value = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& e : req.env) {
    if (e.rfind("PATH=", 0) == 0) path_value = e.substr(5);
  }
  std::string exe = FindOnPath(req.argv[0], path_value);
  std::vector<char*> argv;
  for (const auto& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : req.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : req.cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &cpus);
  }
  ChildArgs args{&req, exe.c_str(), argv.data(), envp.data(), getpid(), req.cpus.empty() ? nullptr : &cpus};

  // Like posix_spawn: the child shares drun's memory until it execs
  // (CLONE_VM | CLONE_VFORK), so starting a worker does not copy the page
  // tables of a process that has gRPC loaded, and this thread waits until the
  // exec. Signals stay blocked across the clone so no handler runs on the
  // child's borrowed memory.
  constexpr size_t kStack = 64 * 1024;
  std::vector<char> stack(kStack);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid = clone(ChildMain, stack.data() + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  const int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return absl::ErrnoToStatus(clone_errno, "clone");
  // Also from the parent, so the group exists before we signal it even if
  // the child has not been scheduled yet.
  setpgid(pid, pid);
  return pid;
}

void BecomeSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1); }

namespace {

// Every pid in `text` ("12 34 "), appended to `out`.
void AppendPids(absl::string_view text, std::vector<pid_t>* out) {
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
    int pid = 0;
    if (absl::SimpleAtoi(word, &pid) && pid > 0) out->push_back(pid);
  }
}

// The children of this process (CONFIG_PROC_CHILDREN): those of its main
// thread, which forks the workers and to which the kernel re-parents orphans
// (the first live thread of a subreaper); false where the kernel has no such
// file.
bool ChildrenOfMainThread(std::vector<pid_t>* out) {
  UniqueFd fd(open(absl::StrCat("/proc/self/task/", getpid(), "/children").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  std::string text;
  char buf[4096];
  ssize_t r;
  while ((r = read(fd.get(), buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(r));
  AppendPids(text, out);
  return true;
}

// The slow way: every process whose parent is this one.
void ChildrenByScan(std::vector<pid_t>* out) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return;
  const pid_t self = getpid();
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::optional<ProcStat> st = ReadProcStat(pid);
    if (st && st->ppid == self) out->push_back(pid);
  }
  closedir(proc);
}

// Waits for `pid` (SIGKILLed) to die, then reaps it; false when it did not
// die by `deadline`.
bool ReapKilled(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
  if (pidfd.valid()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{pidfd.get(), POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) <= 0) return false;
  }
  // Without pidfds (Linux < 5.3): wait, as for any SIGKILLed child.
  return waitpid(pid, nullptr, 0) == pid || errno == ECHILD;
}

}  // namespace

std::vector<pid_t> AdoptedChildren(const std::vector<pid_t>& own) {
  std::vector<pid_t> children;
  if (!ChildrenOfMainThread(&children)) {
    children.clear();
    ChildrenByScan(&children);
  }
  std::vector<pid_t> adopted;
  for (pid_t pid : children) {
    if (std::find(own.begin(), own.end(), pid) == own.end()) adopted.push_back(pid);
  }
  return adopted;
}

namespace {

void RemoveTree(const std::string& path);  // below, beside the guardian's use

// The temporary directory a stale DIR/NAME link names, removed when it is a
// directory of this user named drun-* (never what a link elsewhere leads to).
void RemoveLinkedTemporary(const std::string& link) {
  char target[PATH_MAX];
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return;
  target[n] = '\0';
  const std::string dir(target);
  struct stat st;
  const size_t slash = dir.rfind('/');
  if (slash == std::string::npos || !absl::StartsWith(dir.substr(slash + 1), "drun-") ||
      lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    return;
  }
  RemoveTree(dir);
}

}  // namespace

std::string RecordTemporary(const std::string& control_dir, const std::string& temp_dir) {
  const std::string link = absl::StrCat(control_dir, "/", getpid(), ".tmp");
  RemoveLinkedTemporary(link);  // a dead process of the same pid left it
  unlink(link.c_str());
  return symlink(temp_dir.c_str(), link.c_str()) == 0 ? link : std::string();
}

int RemoveStaleEntries(const std::string& control_dir) {
  DIR* d = opendir(control_dir.c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> stale;
  while (dirent* e = readdir(d)) {
    absl::string_view name = e->d_name;
    int pid = 0;
    if (!absl::ConsumeSuffix(&name, ".sock") && !absl::ConsumeSuffix(&name, ".tmp")) continue;
    if (!absl::SimpleAtoi(name, &pid) || pid <= 0) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) stale.push_back(absl::StrCat(control_dir, "/", e->d_name));
  }
  closedir(d);
  for (const std::string& path : stale) {
    if (absl::EndsWith(path, ".tmp")) RemoveLinkedTemporary(path);
    unlink(path.c_str());
  }
  return static_cast<int>(stale.size());
}

int EndAdoptedChildren(const std::vector<pid_t>& own, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int killed = 0;
  // Each one's own orphans are adopted as it dies: go on until none is left.
  for (std::vector<pid_t> adopted = AdoptedChildren(own); !adopted.empty();
       adopted = AdoptedChildren(own)) {
    for (pid_t pid : adopted) {
      if (kill(pid, SIGKILL) == 0) ++killed;
    }
    for (pid_t pid : adopted) {
      if (!ReapKilled(pid, deadline)) return killed;
    }
  }
  return killed;
}

namespace {

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  remove(path);
  return 0;  // go on: remove what can be removed
}

// rm -rf of one of drun's own paths, never following a symbolic link.
void RemoveTree(const std::string& path) {
  if (path.empty() || path[0] != '/') return;
  nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
}

[[noreturn]] void GuardianMain(int fd) {
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGTSTP}) {
    signal(s, SIG_IGN);
  }
  // Hold no one's terminal or pipes: a test reading drun's stdout to EOF must
  // not wait for us.
  int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    if (devnull > 2) close(devnull);
  }
  std::set<pid_t> groups;
  std::vector<std::string> paths;
  char buf[4096];
  std::string pending;
  bool released = false;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t pos;
    while ((pos = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, pos);
      pending.erase(0, pos + 1);
      if (line.empty()) continue;
      if (line[0] == 'D') {
        released = true;
        continue;
      }
      if (line[0] == 'R') {
        paths.push_back(line.substr(1));
        continue;
      }
      pid_t pg = static_cast<pid_t>(atol(line.c_str() + 1));
      if (pg <= 1) continue;
      if (line[0] == '+') groups.insert(pg);
      if (line[0] == '-') groups.erase(pg);
    }
  }
  if (!released) {
    for (pid_t pg : groups) kill(-pg, SIGKILL);
    for (const std::string& p : paths) RemoveTree(p);
  }
  _exit(0);
}

}  // namespace

Guardian Guardian::Start() {
  Guardian g;
  UniqueFd read_end, write_end;
  if (!MakePipe(&read_end, &write_end)) return g;
  pid_t pid = fork();
  if (pid < 0) return g;
  if (pid == 0) {
    write_end.reset();
    // Leave drun's process group: a terminal's Ctrl-C or a kill of drun's
    // group must not reach the guardian.
    setpgid(0, 0);
    GuardianMain(read_end.get());
  }
  g.fd_ = std::move(write_end);
  g.pid_ = pid;
  return g;
}

Guardian::Guardian(Guardian&& other) noexcept
    : fd_(std::move(other.fd_)), pid_(std::exchange(other.pid_, -1)) {}

Guardian& Guardian::operator=(Guardian&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::move(other.fd_);
    pid_ = std::exchange(other.pid_, -1);
  }
  return *this;
}

Guardian::~Guardian() { Release(); }

void Guardian::Send(char op, pid_t pgid) {
  if (!fd_.valid()) return;
  char line[32];
  int len = snprintf(line, sizeof line, "%c%d\n", op, static_cast<int>(pgid));
  // Writes of < PIPE_BUF bytes are atomic; a full pipe means the guardian is
  // gone, in which case there is nothing better to do.
  while (write(fd_.get(), line, static_cast<size_t>(len)) < 0 && errno == EINTR) {
  }
}

void Guardian::SendLine(const std::string& line) {
  if (!fd_.valid()) return;
  // Writes of up to PIPE_BUF bytes are atomic.
  if (line.size() > PIPE_BUF) return;
  while (write(fd_.get(), line.data(), line.size()) < 0 && errno == EINTR) {
  }
}

void Guardian::RemoveOnDeath(const std::string& path) {
  if (path.empty() || path[0] != '/' || path.find('\n') != std::string::npos) return;
  SendLine("R" + path + "\n");
}

void Guardian::Watch(pid_t pgid) { Send('+', pgid); }
void Guardian::Forget(pid_t pgid) { Send('-', pgid); }

void Guardian::Release() {
  if (!fd_.valid()) return;
  Send('D', 0);
  fd_.reset();
  if (pid_ > 0) {
    // Reap it so no zombie is left for the duration of a long-lived parent.
    int status;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

}  // namespace drun

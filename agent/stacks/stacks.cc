#include "agent/stacks/stacks.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/stacks/proc.h"
#include "agent/stacks/python_reader.h"
#include "agent/stacks/source_lines.h"
#include "agent/stacks/tools.h"

namespace drun::stacks {

const char* MethodName(Method method) {
  switch (method) {
    case Method::kBuiltinPython:
      return "builtin";
    case Method::kPySpy:
      return "py-spy";
    case Method::kEuStack:
      return "eu-stack";
    case Method::kGdb:
      return "gdb";
    case Method::kNone:
      break;
  }
  return "none";
}

namespace {

// Tries of the built-in reader when a thread's chain, or the list of threads,
// changed under it (each try is a few microseconds).
constexpr int kPythonTries = 10;

bool HaveCapSysPtrace() {
  absl::StatusOr<std::string> status = ReadProcFile("/proc/self/status", 1 << 16);
  if (!status.ok()) return false;
  for (absl::string_view line : absl::StrSplit(*status, '\n')) {
    uint64_t caps = 0;
    if (absl::ConsumePrefix(&line, "CapEff:") &&
        absl::SimpleHexAtoi(absl::StripAsciiWhitespace(line), &caps)) {
      return (caps >> 19) & 1;  // CAP_SYS_PTRACE
    }
  }
  return false;
}

// Why reading `pid` was refused, from the facts the kernel checks (owner,
// capability, Yama scope), and what would allow it.
std::string PermissionReason(pid_t pid) {
  const long owner = ProcessUid(pid);
  const long me = static_cast<long>(geteuid());
  const bool cap = HaveCapSysPtrace();
  const int scope = YamaPtraceScope();
  if (owner >= 0 && owner != me && !cap) {
    return absl::StrCat("ptrace not permitted: process ", pid, " belongs to uid ", owner,
                        " and drun runs as uid ", me, " (needs the same user or CAP_SYS_PTRACE)");
  }
  if (scope == 3) return "ptrace not permitted: kernel.yama.ptrace_scope=3 (disabled for everyone)";
  if (scope == 2 && !cap) {
    return "ptrace not permitted: kernel.yama.ptrace_scope=2 (needs CAP_SYS_PTRACE)";
  }
  if (scope == 1 && !cap) {
    return absl::StrCat(
        "ptrace not permitted: kernel.yama.ptrace_scope=1 and this process is not"
        " an ancestor of ",
        pid, " (ask the drun agent that started it)");
  }
  return "ptrace not permitted (a container without CAP_SYS_PTRACE, or seccomp forbidding"
         " process_vm_readv/ptrace)";
}

bool HasThread(const ProcessStacks& s, int tid) {
  for (const ThreadStack& t : s.threads) {
    if (t.tid == tid) return true;
  }
  return false;
}

ThreadStack* ThreadFor(ProcessStacks* s, int tid, const std::string& name) {
  for (ThreadStack& t : s->threads) {
    if (tid != 0 && t.tid == tid) return &t;
  }
  // A thread the tool saw but /proc did not list (started since, or no OS id).
  ThreadStack t;
  t.tid = tid;
  t.name = name;
  s->threads.push_back(std::move(t));
  return &s->threads.back();
}

// "[<0>] kernel_clone+0x1af/0x3e0" lines -> "kernel_clone+0x1af/0x3e0".
std::vector<std::string> ReadKernelStack(pid_t pid, int tid) {
  std::vector<std::string> frames;
  absl::StatusOr<std::string> text =
      ReadProcFile(absl::StrCat("/proc/", pid, "/task/", tid, "/stack"), 1 << 16);
  if (!text.ok()) return frames;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    size_t bracket = line.find("] ");
    frames.emplace_back(bracket == absl::string_view::npos ? line : line.substr(bracket + 2));
  }
  return frames;
}

void ReadProcInfo(pid_t pid, const ProcStat& st, ProcessStacks* s) {
  s->pid = pid;
  s->state = st.state;
  s->cpu_seconds = st.cpu_seconds;
  s->command = st.comm;
  s->wchan = ReadWchan(pid);
  for (int tid : ListTasks(pid)) {
    ThreadStack t;
    t.tid = tid;
    absl::StatusOr<ProcStat> ts = ReadStat(absl::StrCat("/proc/", pid, "/task/", tid, "/stat"));
    if (ts.ok()) {
      t.name = ts->comm;
      t.state = ts->state;
    }
    if (t.state == 'D') t.kernel = ReadKernelStack(pid, tid);
    s->threads.push_back(std::move(t));
  }
}

bool Torn(const PythonStacks& read) {
  bool torn = read.torn;
  for (const PythonThread& t : read.threads) torn = torn || t.truncated;
  return torn;
}

// Reads until a read is whole. Threads ending while the list of thread states
// is walked tear it where they stood, and the oldest states (the main
// thread's) are at its end: when every try is torn, the one that got furthest.
absl::StatusOr<PythonStacks> ReadBuiltin(pid_t pid, const PythonTarget& target) {
  std::optional<PythonStacks> best;
  for (int attempt = 0; attempt < kPythonTries; ++attempt) {
    absl::StatusOr<PythonStacks> read = ReadPythonStacks(pid, target);
    if (!read.ok()) return best ? *std::move(best) : read;
    if (!Torn(*read)) return read;
    if (!best || read->threads.size() > best->threads.size()) best = *std::move(read);
  }
  return *std::move(best);
}

// Python frames: the built-in reader, else py-spy. Returns a reason when
// neither gave frames ("" on success); *denied when the kernel refused access.
std::string CapturePython(pid_t pid, const PythonTarget& target, const CaptureOptions& o,
                          ProcessStacks* s, bool* denied) {
  absl::StatusOr<PythonStacks> read = ReadBuiltin(pid, target);
  if (read.ok()) {
    s->python_method = Method::kBuiltinPython;
    s->python_version = read->version;
    s->python_published_offsets = read->published_offsets;
    for (PythonThread& pt : read->threads) {
      if (pt.no_os_thread) continue;
      // A thread state read while its thread was ending can hold a stale id:
      // keep only threads the process still has (or had when it was listed).
      const int tid = static_cast<int>(pt.native_thread_id);
      // Id 0: a 3.8-3.10 thread whose OS id could not be read (no glibc); kept.
      if (tid != 0 && !HasThread(*s, tid) &&
          access(absl::StrCat("/proc/", pid, "/task/", tid).c_str(), F_OK) != 0) {
        continue;
      }
      ThreadStack* t = ThreadFor(s, tid, "");
      t->python = std::move(pt.frames);
      t->python_truncated = pt.truncated;
    }
    return "";
  }
  *denied = absl::IsPermissionDenied(read.status());
  if (*denied) return PermissionReason(pid);
  const std::string py_spy = FindTool("py-spy");
  if (py_spy.empty()) {
    return absl::StrCat(read.status().message(), "; install py-spy for Python frames");
  }
  absl::StatusOr<std::string> out =
      RunTool({py_spy, "dump", "--nonblocking", "--pid", std::to_string(pid)}, o.tool_timeout);
  std::vector<ToolThread> threads = out.ok() ? ParsePySpy(*out) : std::vector<ToolThread>{};
  if (threads.empty()) {
    return absl::StrCat(read.status().message(), "; py-spy gave no frames",
                        out.ok() ? "" : absl::StrCat(" (", out.status().message(), ")"));
  }
  s->python_method = Method::kPySpy;
  for (ToolThread& tt : threads) ThreadFor(s, tt.tid, tt.name)->python = std::move(tt.frames);
  return "";
}

// Native frames: eu-stack, else gdb. Returns a reason when neither gave frames.
std::string CaptureNative(pid_t pid, const CaptureOptions& o, ProcessStacks* s) {
  // A ptrace attach waits for every thread to stop, which a thread in state D
  // does not do until the kernel lets it go: the tools would only time out.
  for (const ThreadStack& t : s->threads) {
    if (t.state == 'D') {
      return absl::StrCat("no native frames: thread ", t.tid,
                          " is in state D (uninterruptible), which a ptrace attach would wait for");
    }
  }
  struct Tool {
    const char* name;
    Method method;
    std::vector<std::string> args;
    std::vector<ToolThread> (*parse)(absl::string_view);
  };
  const std::string p = std::to_string(pid);
  const Tool tools[] = {
      // Not -s: source lookups read the DWARF of every library (10 s with torch loaded).
      {"eu-stack", Method::kEuStack, {"-m", "-p", p}, ParseEuStack},
      {"gdb", Method::kGdb, {"-p", p, "-batch", "-nx", "-ex", "thread apply all bt"}, ParseGdb}};
  std::vector<std::string> failures;
  for (const Tool& tool : tools) {
    const std::string path = FindTool(tool.name);
    if (path.empty()) continue;
    std::vector<std::string> argv = {path};
    argv.insert(argv.end(), tool.args.begin(), tool.args.end());
    absl::StatusOr<std::string> out = RunTool(argv, o.tool_timeout);
    std::vector<ToolThread> threads = out.ok() ? tool.parse(*out) : std::vector<ToolThread>{};
    bool any = false;
    for (const ToolThread& t : threads) any = any || !t.frames.empty();
    if (!any) {
      failures.push_back(out.ok() ? absl::StrCat(tool.name, " gave no frames")
                                  : std::string(out.status().message()));
      // What made one tool overrun (a process that does not stop) stalls the next too.
      if (absl::IsDeadlineExceeded(out.status())) break;
      continue;
    }
    s->native_method = tool.method;
    for (ToolThread& tt : threads) ThreadFor(s, tt.tid, tt.name)->native = std::move(tt.frames);
    return "";
  }
  if (failures.empty()) {
    return "no native frames: neither eu-stack (package elfutils) nor gdb is on PATH";
  }
  return absl::StrCat("no native frames: ", absl::StrJoin(failures, ", "));
}

// Each Python frame's source line, each file read once.
void AddSourceLines(ProcessStacks* s) {
  SourceLines sources(s->pid);
  for (ThreadStack& t : s->threads) {
    for (Frame& f : t.python) f.source = sources.Line(f.file, f.line);
  }
}

}  // namespace

absl::StatusOr<ProcessStacks> Capture(pid_t pid, const CaptureOptions& options) {
  if (pid <= 0) return absl::InvalidArgumentError(absl::StrCat("invalid pid ", pid));
  absl::StatusOr<ProcStat> st = ReadStat(absl::StrCat("/proc/", pid, "/stat"));
  if (!st.ok()) {
    if (absl::IsNotFound(st.status())) return absl::NotFoundError(absl::StrCat("no process ", pid));
    return st.status();
  }
  ProcessStacks s;
  ReadProcInfo(pid, *st, &s);
  if (s.state == 'Z') {  // its memory is gone already; only the parent's wait() is missing
    s.unavailable = "the process has exited (zombie, not yet reaped by its parent): no stack";
    return s;
  }
  absl::StatusOr<std::vector<Mapping>> maps = ReadMaps(pid);
  if (absl::IsNotFound(maps.status())) return absl::NotFoundError(absl::StrCat("no process ", pid));
  if (!maps.ok()) {
    s.unavailable = absl::IsPermissionDenied(maps.status()) ? PermissionReason(pid)
                                                            : std::string(maps.status().message());
    return s;
  }
  std::vector<std::string> missing;
  absl::StatusOr<PythonTarget> python = FindPython(pid, *maps);
  bool want_native = options.native || !python.ok();
  if (python.ok() && options.python) {
    bool denied = false;
    std::string why = CapturePython(pid, *python, options, &s, &denied);
    // No Python frames (an interpreter drun cannot read, no py-spy): native
    // frames at least show which C function it waits in (a collective, a lock).
    // A refusal by the kernel would refuse the native tools too.
    want_native = (want_native || s.python_method == Method::kNone) && !denied;
    if (!why.empty()) missing.push_back(std::move(why));
  }
  if (options.source_lines) AddSourceLines(&s);
  if (want_native) {
    std::string why = CaptureNative(pid, options, &s);
    if (!why.empty()) missing.push_back(std::move(why));
  }
  // The process may have ended while it was read: that is "no process", not an empty dump.
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    return absl::NotFoundError(absl::StrCat("process ", pid, " ended while being read"));
  }
  s.unavailable = absl::StrJoin(missing, "; ");
  return s;
}

namespace {

void FormatFrames(const ThreadStack& t, std::string* out) {
  for (const Frame& f : t.python) {
    absl::StrAppend(out, "  File \"", f.file, "\", line ", f.line, ", in ", f.function, "\n");
    if (!f.source.empty()) absl::StrAppend(out, "    ", f.source, "\n");
  }
  if (t.python_truncated) {
    absl::StrAppend(out, "  ... (stack changed while being read, or deeper than ", kMaxPythonFrames,
                    " frames; partial)\n");
  }
  for (const std::string& k : t.kernel) absl::StrAppend(out, "  kernel: ", k, "\n");
  for (size_t i = 0; i < t.native.size(); ++i) {
    const Frame& f = t.native[i];
    absl::StrAppend(out, "  #", i, " ", f.function);
    if (!f.file.empty())
      absl::StrAppend(out, " at ", f.file, f.line > 0 ? absl::StrCat(":", f.line) : "");
    if (!f.module.empty()) absl::StrAppend(out, " (", f.module, ")");
    out->push_back('\n');
  }
}

}  // namespace

std::string FormatText(const ProcessStacks& s) {
  std::string out = absl::StrFormat("Process %d (%s) state %c", s.pid, s.command, s.state);
  if (!s.wchan.empty()) absl::StrAppend(&out, " wchan ", s.wchan);
  absl::StrAppend(&out, absl::StrFormat(" cpu %.2fs", s.cpu_seconds));
  if (s.python_method != Method::kNone) {
    absl::StrAppend(&out, " python: ", MethodName(s.python_method));
    if (!s.python_version.empty()) {
      absl::StrAppend(&out, " (CPython ", s.python_version,
                      s.python_published_offsets ? " via _Py_DebugOffsets" : "", ")");
    }
  }
  if (s.native_method != Method::kNone)
    absl::StrAppend(&out, " native: ", MethodName(s.native_method));
  out.push_back('\n');
  if (!s.unavailable.empty()) absl::StrAppend(&out, "  frames unavailable: ", s.unavailable, "\n");
  for (const ThreadStack& t : s.threads) {
    absl::StrAppend(&out, "Thread ", t.tid, " \"", t.name, "\" (state ", std::string(1, t.state),
                    "):\n");
    FormatFrames(t, &out);
  }
  return out;
}

}  // namespace drun::stacks

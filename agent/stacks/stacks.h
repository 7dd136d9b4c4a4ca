// drun::stacks captures where one live process is, without stopping it and
// without sending it a signal: its state and kernel wait channel, CPU time,
// every thread, and for each thread its Python frames (CPython) and/or its
// native frames (function names).
//
// Methods, in the order tried (docs/stacks.md says what each one needs):
//  - Python: drun's built-in reader (process_vm_readv of the interpreter's
//    memory; CPython 3.8 to 3.15, whose struct offsets were generated from
//    each version's headers and, from 3.13 on, are read from the process's
//    own _Py_DebugOffsets: python_reader.h); else `py-spy dump
//    --nonblocking` when py-spy is on PATH. Each Python frame gets its source
//    line when its file is readable (source_lines.h).
//  - Native (a process with no Python interpreter, a Python process whose
//    Python frames could not be read, or CaptureOptions::native):
//    `eu-stack -m -p PID` (elfutils), else `gdb -batch`. Both attach with ptrace
//    for the duration of the unwind (milliseconds), the only stop involved;
//    neither runs on a process with a thread in state D (the attach would wait
//    for it), gdb not after eu-stack overran.
//  - Kernel: a thread in state D gets its /proc/PID/task/TID/stack (root only).
// External tools run without a shell, stdin from /dev/null, and are killed
// (their process group, by pid) when they overrun CaptureOptions::tool_timeout.
//
// Cost: the built-in reader takes well under a millisecond per process;
// each external tool run is bounded by CaptureOptions::tool_timeout (at most
// three runs: py-spy, eu-stack, gdb). Reading /proc/PID/maps or memory can
// wait while the target holds its memory-map lock in the kernel (docs/stacks.md),
// so call Capture off any thread that must stay responsive.
//
// Capture fails only when the process does not exist (NotFound) or the pid is
// invalid. Anything that keeps frames from being read (another user's
// process, ptrace forbidden, an unreadable interpreter version, no tool) is
// reported as one line in ProcessStacks::unavailable, with what is known.
// Thread-safe: Capture keeps no state across calls except an immutable
// per-binary symbol cache guarded by a mutex.
#ifndef DRUN_AGENT_STACKS_STACKS_H_
#define DRUN_AGENT_STACKS_STACKS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace drun::stacks {

struct Frame {
  std::string function;  // Python: co_qualname; native: symbol ("??" when unknown)
  std::string file;      // Python: co_filename; native: source file when known
  int line = 0;          // 0: unknown
  std::string module;    // native: shared object, when the tool says it
  // Python: the text of `line` in `file` without its indentation, when the
  // file is readable on this node (CaptureOptions::source_lines); else "".
  std::string source;
};

struct ThreadStack {
  int tid = 0;
  std::string name;               // /proc/PID/task/TID/comm
  char state = '?';               // /proc/PID/task/TID/stat: R, S, D, T, Z, ...
  std::vector<Frame> python;      // innermost first
  std::vector<Frame> native;      // innermost first
  bool python_truncated = false;  // the frame chain changed while being read, or was too deep
  // For a thread in state D (uninterruptible: I/O, a driver), its kernel stack
  // from /proc/PID/task/TID/stack, innermost first ("kernel_clone+0x1af/0x3e0");
  // empty for other states or when not readable (needs root).
  std::vector<std::string> kernel;
};

enum class Method { kNone, kBuiltinPython, kPySpy, kEuStack, kGdb };

struct ProcessStacks {
  int pid = 0;
  char state = '?';
  std::string wchan;                 // /proc/PID/wchan; empty when running or not known
  double cpu_seconds = 0;            // utime + stime of the whole process
  std::string command;               // /proc/PID/comm
  std::vector<ThreadStack> threads;  // every thread, /proc/PID/task order
  Method python_method = Method::kNone;
  Method native_method = Method::kNone;
  std::string python_version;  // "3.11.2" when a CPython interpreter was found
  bool python_published_offsets = false;  // the reader used the process's _Py_DebugOffsets
  // One line: why Python/native frames are missing and what would give them;
  // empty when every method asked for worked.
  std::string unavailable;
};

struct CaptureOptions {
  bool python = true;   // Python frames when the process runs CPython
  bool native = false;  // native frames also for Python processes (ptrace-attaches briefly)
  absl::Duration tool_timeout = absl::Seconds(5);  // per external tool run
  bool source_lines = true;  // Frame::source of Python frames, read from their files
};

absl::StatusOr<ProcessStacks> Capture(pid_t pid, const CaptureOptions& options);

// Human-readable dump: a process header line (pid, state, wchan, cpu, method,
// "via _Py_DebugOffsets" when the reader took the offsets from the process),
// then per thread a header "Thread TID "name" (state S)" followed by Python
// frames like a traceback (`  File "x.py", line 12, in f`, then the source
// line indented by four spaces when it is known) and native frames
// (`  #0 func (module)`), innermost first.
std::string FormatText(const ProcessStacks& stacks);

// "builtin", "py-spy", "eu-stack", "gdb", "none".
const char* MethodName(Method method);

}  // namespace drun::stacks

#endif  // DRUN_AGENT_STACKS_STACKS_H_

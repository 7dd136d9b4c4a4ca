// drun's built-in CPython stack reader: reads a live interpreter's thread
// states and frame chains from outside with process_vm_readv, so the target
// is neither stopped nor signalled (it needs the same permission as ptrace
// attach: docs/stacks.md).
//
// Supports CPython 3.8 to 3.15 (builds with the GIL): the target's
// version (the _Py_DebugOffsets table at the start of _PyRuntime, 3.13+; else
// Py_Version, 3.11+; else the version in the name of the binary or libpython
// that exports _PyRuntime) selects one CPythonLayout (cpython_layout.h),
// whose offsets were generated from that version's own headers. From 3.13 on
// the offsets the target publishes in its _Py_DebugOffsets are read from it
// and used (the generated ones are the cross-check: layout_differs), so a
// CPython newer than 3.15 is read with its own offsets over 3.15's constants,
// or refused in one line when its table is not laid out as 3.15's.
// Frames: 3.8-3.10 chain PyFrameObjects by f_back; 3.11 and 3.12 chain
// _PyInterpreterFrames from tstate->cframe, 3.13+ from tstate->current_frame
// (f_executable for f_code, a tagged _PyStackRef from 3.14; instr_ptr for
// prev_instr); frames owned by the C stack (3.12, 3.13 entry frames) or the
// interpreter (3.14+) and frames still in their prologue are not shown, as
// CPython's own tracebacks do not show them. A debug build is read from 3.13
// on, with the offsets it publishes only. Another version, a debug build
// before 3.13 or one whose table does not check out, or a free-threaded build
// gets FailedPrecondition with one line naming it.
//
// The target keeps running while it is read, so every loop is bounded, every
// string length capped, every code object's type checked; a chain that
// changes under the reader ends early with PythonThread::truncated set rather
// than with invented frames.
#ifndef DRUN_AGENT_STACKS_PYTHON_READER_H_
#define DRUN_AGENT_STACKS_PYTHON_READER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/stacks/proc.h"
#include "agent/stacks/stacks.h"

namespace drun::stacks {

// Where a CPython interpreter lives in a process (addresses already biased).
struct PythonTarget {
  std::string binary;         // the mapped ELF that exports _PyRuntime
  uint64_t runtime = 0;       // &_PyRuntime
  uint64_t version = 0;       // &Py_Version (3.11+); 0 when not exported
  uint64_t code_type = 0;     // &PyCode_Type, 0 when unknown
  uint64_t unicode_type = 0;  // &PyUnicode_Type, 0 when unknown
  uint64_t bytes_type = 0;    // &PyBytes_Type, 0 when unknown
  uint64_t frame_type = 0;    // &PyFrame_Type, 0 when unknown (3.8-3.10 frames are objects)
  std::string name_version;   // "3.10" from a name like libpython3.10.so; "" when none
  bool free_threaded = false;  // the name says so ("python3.13t"): another object layout
  bool debug_build = false;    // exports _Py_RefTotal or _Py_GetRefTotal: Py_DEBUG's layout
  // &_thread_db_pthread_tid in the target's glibc (libc or libpthread), 0 when
  // not found: {bits, count, offset} of struct pthread's tid, the way to an OS
  // thread id from a pthread_t for 3.8-3.10, whose thread states have none.
  uint64_t pthread_tid_desc = 0;
};

// Finds the interpreter in `pid`'s mappings (`maps`, from ReadMaps). NotFound
// when no mapping exports _PyRuntime (not a CPython process).
absl::StatusOr<PythonTarget> FindPython(pid_t pid, const std::vector<Mapping>& maps);

// The most frames read of one thread, innermost first; a deeper stack is cut
// there (PythonThread::truncated).
constexpr int kMaxPythonFrames = 2048;

struct PythonThread {
  // The OS thread id: PyThreadState.native_thread_id (3.11+), else the tid of
  // the thread's struct pthread (3.8-3.10); 0 when it could not be read.
  uint64_t native_thread_id = 0;
  // The thread state has no OS thread: not yet (3.12+ create it before the
  // thread, whose native_thread_id is 0 until it runs) or no more (3.8-3.10:
  // the kernel zeroed struct pthread's tid at the thread's exit). Nothing to show.
  bool no_os_thread = false;
  std::vector<Frame> frames;      // innermost first
  bool truncated = false;
};
struct PythonStacks {
  std::string version;  // "3.11.2" (from Py_Version), or "3.10" (from the binary's name)
  // The offsets came from the target's own _Py_DebugOffsets (3.13+).
  bool published_offsets = false;
  // Where those differ from the generated layout of the same version
  // ("field published/generated, ..."); "" when they agree or one is missing.
  std::string layout_differs;
  std::vector<PythonThread> threads;
  // The thread list was read while a thread state left it (a link led to
  // memory that is not one of this interpreter's thread states): threads may
  // be missing, so read again.
  bool torn = false;
};

// Reads every thread of every interpreter. Errors: FailedPrecondition when
// this build cannot read that interpreter's version (the message names it);
// the errno's code (PermissionDenied, NotFound) when memory cannot be read.
absl::StatusOr<PythonStacks> ReadPythonStacks(pid_t pid, const PythonTarget& target);

// Line tables: the line of the code unit at byte offset `addr` in a code
// object whose first line is `first_line`; -1 when the table gives it no line.
// CPython 3.11+'s location table (Objects/locations.md):
int Py311AddressToLine(absl::string_view linetable, int first_line, int addr);
// CPython 3.10's co_linetable (Objects/lnotab_notes.txt, PEP 626):
int Py310AddressToLine(absl::string_view linetable, int first_line, int addr);
// CPython 3.8's and 3.9's co_lnotab (never -1):
int LnotabAddressToLine(absl::string_view lnotab, int first_line, int addr);

// "3.11.2" from a PY_VERSION_HEX value.
std::string PythonVersionString(uint32_t hex);

}  // namespace drun::stacks

#endif  // DRUN_AGENT_STACKS_PYTHON_READER_H_

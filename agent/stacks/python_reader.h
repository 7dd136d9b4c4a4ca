// drun's built-in CPython stack reader: reads a live interpreter's thread
// states and frame chains from outside with process_vm_readv, so the target
// is neither stopped nor signalled (it needs the same permission as ptrace
// attach: docs/stacks.md).
//
// Supports CPython 3.11, the version whose internal headers were installed at
// build time: every struct offset comes from cpython311_offsets.h, generated
// by compiling cpython311_offsets_gen.c against those headers. A build without
// them reads nothing (FailedPrecondition "built without CPython 3.11 offsets").
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
  std::string name_version;   // "3.10" from a name like libpython3.10.so, for messages
  bool debug_build = false;   // exports _Py_RefTotal: Py_DEBUG, whose object layout differs
};

// Finds the interpreter in `pid`'s mappings (`maps`, from ReadMaps). NotFound
// when no mapping exports _PyRuntime (not a CPython process).
absl::StatusOr<PythonTarget> FindPython(pid_t pid, const std::vector<Mapping>& maps);

struct PythonThread {
  uint64_t native_thread_id = 0;  // the OS thread id (PyThreadState.native_thread_id)
  std::vector<Frame> frames;      // innermost first
  bool truncated = false;
};
struct PythonStacks {
  std::string version;  // "3.11.2"
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

// CPython 3.11's location table (Objects/locations.md): the line of the code
// unit at byte offset `addr` in a code object whose first line is
// `first_line`; -1 when the table gives it no line.
int Py311AddressToLine(absl::string_view linetable, int first_line, int addr);

// "3.11.2" from a PY_VERSION_HEX value.
std::string PythonVersionString(uint32_t hex);

}  // namespace drun::stacks

#endif  // DRUN_AGENT_STACKS_PYTHON_READER_H_

// Where the built-in stack reader finds things inside a CPython interpreter,
// one CPythonLayout per minor version, 3.8 to 3.15: struct offsets and
// constants generated from each version's own headers by
// agent/stacks/gen_cpython_layouts.py (cpython_layouts_gen.inc, committed;
// the build needs no CPython headers). Offsets are in bytes; an offset of 0
// for a field that no struct of that version starts with means "absent".
//
// From 3.13 on, the interpreter publishes most of these offsets itself, in
// the _Py_DebugOffsets table at the start of _PyRuntime (the table CPython's
// own remote debugging reads). For those versions a layout also says where in
// that table each offset sits (the dbg_ fields): LayoutFromDebugOffsets reads
// them from the target process, and the generated values serve as the
// cross-check and for what the table does not hold (line table format, str
// state bits, frame owners).
#ifndef DRUN_AGENT_STACKS_CPYTHON_LAYOUT_H_
#define DRUN_AGENT_STACKS_CPYTHON_LAYOUT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace drun::stacks {

struct CPythonLayout {
  uint32_t version_hex = 0;  // PY_VERSION_HEX of the (lowest) headers it came from

  // Objects.
  uint32_t ob_type = 0;       // PyObject.ob_type
  uint32_t var_size = 0;      // PyVarObject.ob_size
  uint32_t bytes_data = 0;    // PyBytesObject.ob_sval
  uint32_t unicode_length = 0, ascii_size = 0, compact_size = 0;  // PyASCIIObject.length, sizes
  uint32_t state_offset = 0;  // PyASCIIObject.state and its bitfields' masks
  uint32_t state_compact_mask = 0, state_ascii_mask = 0, state_kind_mask = 0, state_kind_shift = 0;

  // Interpreters and thread states.
  uint32_t runtime_interpreters_head = 0;  // _PyRuntime.interpreters.head
  uint32_t interp_next = 0;                // PyInterpreterState.next
  uint32_t interp_threads_head = 0;        // .tstate_head (3.8-3.10), .threads.head (3.11+)
  uint32_t tstate_next = 0, tstate_interp = 0;
  uint32_t tstate_thread_id = 0;         // pthread_t of the thread
  uint32_t tstate_native_thread_id = 0;  // the OS thread id (3.11+); 0: absent

  // Code objects.
  uint32_t code_filename = 0, code_name = 0, code_first_lineno = 0;
  uint32_t code_qualname = 0;         // 3.11+; 0: absent
  uint32_t code_linetable = 0;        // co_lnotab (3.8, 3.9), co_linetable (3.10+)
  uint32_t code_first_traceable = 0;  // _co_firsttraceable (3.11+)
  uint32_t code_adaptive = 0;         // co_code_adaptive: the first code unit (3.11+)
  uint32_t code_unit_size = 0;        // sizeof(_Py_CODEUNIT)
  // 0: co_lnotab (3.8, 3.9); 1: 3.10's co_linetable; 2: the location table (3.11+).
  uint32_t line_table = 0;

  // Frames. frame_kind 0 (3.8-3.10): tstate_frame is PyThreadState.frame, a
  // PyFrameObject chained by f_back (frame_back), with f_lasti/f_lineno.
  // 1 (3.11, 3.12): tstate_frame is PyThreadState.cframe, whose
  // cframe_current_frame is the innermost _PyInterpreterFrame; tstate_root_cframe
  // is the thread state's own (empty at rest). 2 (3.13+): tstate_frame is
  // PyThreadState.current_frame. For 1 and 2, frames chain by `previous`
  // (frame_back); frame_code is f_code (f_executable from 3.13: a code object
  // or None, tagged as a _PyStackRef from 3.14), frame_instr prev_instr
  // (instr_ptr from 3.13), frame_owner `owner`.
  uint32_t frame_kind = 0;
  uint32_t tstate_frame = 0, tstate_root_cframe = 0, cframe_current_frame = 0;
  uint32_t frame_back = 0, frame_code = 0;
  uint32_t frame_lasti = 0, frame_lineno = 0;  // PyFrameObject (frame_kind 0)
  uint32_t frame_instr = 0, frame_owner = 0;   // _PyInterpreterFrame (frame_kind 1, 2)
  uint32_t owned_by_generator = 0;             // FRAME_OWNED_BY_GENERATOR
  // Frames whose owner is this or more are no Python frames: the C stack's
  // entry frames (FRAME_OWNED_BY_CSTACK, 3.12 and 3.13), the interpreter's own
  // (FRAME_OWNED_BY_INTERPRETER, 3.14+); 0xff: none (3.11). From 3.14 on,
  // frame_code is a _PyStackRef whose low bits are tags.
  uint32_t first_c_owner = 0xff;

  // 3.13+: sizeof(_Py_DebugOffsets), and where in it each offset above is
  // published (0: not published, the generated value stands).
  uint32_t debug_offsets_size = 0;
  uint32_t dbg_runtime_interpreters_head = 0, dbg_interp_next = 0, dbg_interp_threads_head = 0;
  uint32_t dbg_tstate_next = 0, dbg_tstate_interp = 0, dbg_tstate_frame = 0;
  uint32_t dbg_tstate_thread_id = 0, dbg_tstate_native_thread_id = 0;
  uint32_t dbg_frame_back = 0, dbg_frame_code = 0, dbg_frame_instr = 0, dbg_frame_owner = 0;
  uint32_t dbg_code_filename = 0, dbg_code_name = 0, dbg_code_qualname = 0;
  uint32_t dbg_code_linetable = 0, dbg_code_first_lineno = 0, dbg_code_adaptive = 0;
  uint32_t dbg_ob_type = 0, dbg_var_size = 0, dbg_bytes_data = 0;
  uint32_t dbg_state_offset = 0, dbg_unicode_length = 0, dbg_ascii_size = 0;
};

// The fixed start of every _Py_DebugOffsets (3.13+): an 8-byte cookie, then
// PY_VERSION_HEX and whether the build is free-threaded, as uint64s.
inline constexpr char kDebugCookie[8] = {'x', 'd', 'e', 'b', 'u', 'g', 'p', 'y'};
inline constexpr uint32_t kDebugVersionAt = 8, kDebugFreeThreadedAt = 16;

// The layout of CPython major.minor of `version_hex` (a PY_VERSION_HEX, or
// just (major << 24) | (minor << 16)); nullptr when drun has none.
const CPythonLayout* FindCPythonLayout(uint32_t version_hex);

// The newest layout drun has (3.15's): the base for a newer CPython, whose
// own _Py_DebugOffsets then gives what it publishes.
const CPythonLayout& NewestCPythonLayout();

// "3.8-3.15": the versions drun reads, for messages.
std::string CPythonLayoutRange();

// `base` with every offset the target publishes taken from `table`, the
// bytes of its _Py_DebugOffsets (at least base.debug_offsets_size of them).
// Fails naming the field when a published value cannot be one (past 1 MiB, or
// an object header unlike every CPython's), the sign of a table laid out
// differently from base's: a version newer than drun knows.
absl::StatusOr<CPythonLayout> LayoutFromDebugOffsets(const CPythonLayout& base,
                                                     absl::string_view table);

// The fields whose published value differs from the generated one, as
// "name published/generated" joined by ", "; "" when all agree.
std::string CompareLayouts(const CPythonLayout& published, const CPythonLayout& generated);

}  // namespace drun::stacks

#endif  // DRUN_AGENT_STACKS_CPYTHON_LAYOUT_H_

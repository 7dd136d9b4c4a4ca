/* Layout probe for agent/stacks/gen_cpython_layouts.py: compiled against one
 * CPython's headers (3.8 to 3.15, internal ones included, Py_BUILD_CORE) and
 * run on the build machine of the generator, never by drun's build. Prints
 * "name value" lines: the struct offsets and constants the built-in stack
 * reader (python_reader.cc) needs, so no offset is ever typed by hand. Never
 * linked with libpython: it only uses offsetof/sizeof and a local struct's
 * bit pattern. The field names printed are CPythonLayout's (cpython_layout.h). */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if PY_VERSION_HEX < 0x03080000 || PY_VERSION_HEX >= 0x03100000
#error "the stack reader knows CPython 3.8 to 3.15"
#endif

#if PY_VERSION_HEX < 0x03090000
#include <internal/pycore_pystate.h>
#else
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_frame.h>
#endif

#define P(name, value) printf("%s %llu\n", name, (unsigned long long)(value))

/* The bits of PyASCIIObject.state that a field occupies: a bitfield has no
 * offsetof, so set it in a zeroed object and see which bits moved. */
static unsigned state_word(const PyASCIIObject* o) {
  unsigned word;
  memcpy(&word, (const char*)o + offsetof(PyASCIIObject, state), sizeof word);
  return word;
}

static void state_bits(void) {
  PyASCIIObject o;
  memset(&o, 0, sizeof o);
  o.state.compact = 1;
  P("state_compact_mask", state_word(&o));
  memset(&o, 0, sizeof o);
  o.state.ascii = 1;
  P("state_ascii_mask", state_word(&o));
  memset(&o, 0, sizeof o);
  o.state.kind = 7;
  P("state_kind_mask", state_word(&o));
  P("state_kind_shift", __builtin_ctz(state_word(&o)));
  P("state_offset", offsetof(PyASCIIObject, state));
}

static void objects(void) {
  P("ob_type", offsetof(PyObject, ob_type));
  P("var_size", offsetof(PyVarObject, ob_size));
  P("bytes_data", offsetof(PyBytesObject, ob_sval));
  P("unicode_length", offsetof(PyASCIIObject, length));
  P("ascii_size", sizeof(PyASCIIObject));
  P("compact_size", sizeof(PyCompactUnicodeObject));
  state_bits();
}

static void threads(void) {
  P("runtime_interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
  P("interp_next", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX >= 0x030B0000
  P("interp_threads_head", offsetof(PyInterpreterState, threads.head));
#else
  P("interp_threads_head", offsetof(PyInterpreterState, tstate_head));
#endif
  P("tstate_next", offsetof(PyThreadState, next));
  P("tstate_interp", offsetof(PyThreadState, interp));
  P("tstate_thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030B0000
  P("tstate_native_thread_id", offsetof(PyThreadState, native_thread_id));
#endif
}

static void code(void) {
  P("code_filename", offsetof(PyCodeObject, co_filename));
  P("code_name", offsetof(PyCodeObject, co_name));
  P("code_first_lineno", offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX >= 0x030A0000
  P("code_linetable", offsetof(PyCodeObject, co_linetable));
#else
  P("code_linetable", offsetof(PyCodeObject, co_lnotab));
#endif
#if PY_VERSION_HEX >= 0x030B0000
  P("code_qualname", offsetof(PyCodeObject, co_qualname));
  P("code_first_traceable", offsetof(PyCodeObject, _co_firsttraceable));
  P("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#endif
  P("code_unit_size", sizeof(_Py_CODEUNIT));
  /* 0: co_lnotab (3.8, 3.9); 1: 3.10's co_linetable (PEP 626); 2: the
   * location table of 3.11 and later (Objects/locations.md). */
  P("line_table", PY_VERSION_HEX < 0x030A0000 ? 0 : PY_VERSION_HEX < 0x030B0000 ? 1 : 2);
}

/* 3.8-3.10: PyThreadState.frame -> PyFrameObject, chained by f_back. */
#if PY_VERSION_HEX < 0x030B0000
static void frames(void) {
  P("frame_kind", 0);
  P("tstate_frame", offsetof(PyThreadState, frame));
  P("frame_back", offsetof(PyFrameObject, f_back));
  P("frame_code", offsetof(PyFrameObject, f_code));
  P("frame_lasti", offsetof(PyFrameObject, f_lasti));
  P("frame_lineno", offsetof(PyFrameObject, f_lineno));
}
#else
/* 3.11+: _PyInterpreterFrame chained by previous; 3.11 and 3.12 reach the
 * innermost one through tstate->cframe, 3.13 and later hold it in the tstate
 * (3.14 and later tag f_executable as a _PyStackRef: its low bits are flags). */
static void frames(void) {
#if PY_VERSION_HEX >= 0x030D0000
  P("frame_kind", 2);
  P("tstate_frame", offsetof(PyThreadState, current_frame));
  P("frame_code", offsetof(_PyInterpreterFrame, f_executable));
  P("frame_instr", offsetof(_PyInterpreterFrame, instr_ptr));
#else
  P("frame_kind", 1);
  P("tstate_frame", offsetof(PyThreadState, cframe));
  P("tstate_root_cframe", offsetof(PyThreadState, root_cframe));
  P("cframe_current_frame", offsetof(_PyCFrame, current_frame));
  P("frame_code", offsetof(_PyInterpreterFrame, f_code));
  P("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
#endif
  P("frame_back", offsetof(_PyInterpreterFrame, previous));
  P("frame_owner", offsetof(_PyInterpreterFrame, owner));
  P("owned_by_generator", FRAME_OWNED_BY_GENERATOR);
  /* The lowest owner of frames that are no Python frames: the C stack's
   * entry frames (3.12, 3.13), the interpreter's own ones (3.14 and later). */
#if PY_VERSION_HEX >= 0x030E0000
  P("first_c_owner", FRAME_OWNED_BY_INTERPRETER);
#elif PY_VERSION_HEX >= 0x030C0000
  P("first_c_owner", FRAME_OWNED_BY_CSTACK);
#endif
}
#endif

/* 3.13+: where, inside the _Py_DebugOffsets table that starts _PyRuntime,
 * the interpreter publishes each offset the reader needs ("dbg_" + the
 * CPythonLayout field it gives), so a reader takes them from the process. */
#if PY_VERSION_HEX >= 0x030D0000
#define D(field, member) P("dbg_" field, offsetof(_Py_DebugOffsets, member))
static void debug_offsets(void) {
  P("debug_offsets_size", sizeof(_Py_DebugOffsets));
  D("runtime_interpreters_head", runtime_state.interpreters_head);
  D("interp_next", interpreter_state.next);
  D("interp_threads_head", interpreter_state.threads_head);
  D("tstate_next", thread_state.next);
  D("tstate_interp", thread_state.interp);
  D("tstate_frame", thread_state.current_frame);
  D("tstate_thread_id", thread_state.thread_id);
  D("tstate_native_thread_id", thread_state.native_thread_id);
  D("frame_back", interpreter_frame.previous);
  D("frame_code", interpreter_frame.executable);
  D("frame_instr", interpreter_frame.instr_ptr);
  D("frame_owner", interpreter_frame.owner);
  D("code_filename", code_object.filename);
  D("code_name", code_object.name);
  D("code_qualname", code_object.qualname);
  D("code_linetable", code_object.linetable);
  D("code_first_lineno", code_object.firstlineno);
  D("code_adaptive", code_object.co_code_adaptive);
  D("ob_type", pyobject.ob_type);
  D("var_size", bytes_object.ob_size);
  D("bytes_data", bytes_object.ob_sval);
  D("state_offset", unicode_object.state);
  D("unicode_length", unicode_object.length);
  D("ascii_size", unicode_object.asciiobject_size);
}
#else
static void debug_offsets(void) {}
#endif

int main(void) {
  P("version_hex", PY_VERSION_HEX);
  objects();
  threads();
  code();
  frames();
  debug_offsets();
  return fflush(stdout) == 0 ? 0 : 1;
}

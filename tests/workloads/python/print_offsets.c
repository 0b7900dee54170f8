/*
 * Prints, as "name=value" lines, the CPython struct offsets that pystrobe's
 * tables (daemon/python/python_offsets.cc) claim for this interpreter version.
 * Compiled by tests/unit/python/python_offsets_test.cc against each installed
 * version's own headers (with -DPy_BUILD_CORE), so the tables are checked
 * against the real layouts, not against our reading of them. Not product code.
 *
 * 2.7 and 3.6 have no _PyRuntime: their roots and GIL are file-scope globals
 * found per binary from symbols (interpreter_finder.cc), so the fields
 * relative to them are NONE here as in the tables.
 */
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if PY_VERSION_HEX >= 0x03090000
#include "internal/pycore_interp.h"
#endif
#if PY_VERSION_HEX >= 0x03080000
#include "internal/pycore_pystate.h"
#elif PY_VERSION_HEX >= 0x03070000
#include "internal/pystate.h"
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#include "internal/pycore_runtime.h"
#endif
#if PY_VERSION_HEX >= 0x030E0000
#include "internal/pycore_code.h"
#include "internal/pycore_debug_offsets.h"
#include "internal/pycore_interpframe.h"
#endif

#define P(name, value) printf("%s=%lu\n", name, (unsigned long)(value))
#define NONE 0xffffffffUL

#if PY_MAJOR_VERSION >= 3
/* Bit position of `kind` in PyASCIIObject.state, found by setting the field. */
static unsigned unicode_state_shift(int which) {
  PyASCIIObject o;
  unsigned int state;
  memset(&o, 0, sizeof(o));
  if (which == 0)
    o.state.kind = 1;
  else if (which == 1)
    o.state.compact = 1;
  else
    o.state.ascii = 1;
  memcpy(&state, (char*)&o + offsetof(PyASCIIObject, state), sizeof(state));
  return (unsigned)__builtin_ctz(state);
}
#endif

#if PY_VERSION_HEX >= 0x030E0000
/* `print_offsets --debug-offsets`: the _Py_DebugOffsets this build puts at
 * the start of _PyRuntime, as hex, to check our reading of them against. */
static int print_debug_offsets(void) {
  static const _Py_DebugOffsets offsets = _Py_DebugOffsets_INIT(_Py_Debug_Cookie);
  const unsigned char* bytes = (const unsigned char*)&offsets;
  for (size_t i = 0; i < sizeof(offsets); i++) printf("%02x", bytes[i]);
  printf("\n");
  return 0;
}
#endif

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--debug-offsets") == 0) {
#if PY_VERSION_HEX >= 0x030E0000
    return print_debug_offsets();
#else
    return 2;
#endif
  }
  P("version_major", PY_MAJOR_VERSION);
  P("version_minor", PY_MINOR_VERSION);
#if PY_VERSION_HEX < 0x03070000
  P("runtime_interpreters_head", NONE);
  P("runtime_gil", NONE);
  P("interp_gil_ptr", NONE);
  P("gil_last_holder", NONE);
  P("gil_locked", NONE);
  P("gil_cond", NONE);
  P("gil_wait_span", 0);
#else
  P("runtime_interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX < 0x030C0000
  P("runtime_gil", offsetof(_PyRuntimeState, ceval.gil));
  P("interp_gil_ptr", NONE);
#else
  P("runtime_gil", NONE);
  P("interp_gil_ptr", offsetof(PyInterpreterState, ceval.gil));
#endif
  P("gil_last_holder", offsetof(struct _gil_runtime_state, last_holder));
  P("gil_locked", offsetof(struct _gil_runtime_state, locked));
  P("gil_cond", offsetof(struct _gil_runtime_state, cond));
  /* A waiter sleeps on cond, or on mutex, which follows it. */
  P("gil_wait_span", offsetof(struct _gil_runtime_state, mutex) +
                         sizeof(((struct _gil_runtime_state*)0)->mutex) -
                         offsetof(struct _gil_runtime_state, cond));
#endif
  P("interp_next", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX < 0x030B0000
  P("interp_tstate_head", offsetof(PyInterpreterState, tstate_head));
#else
  P("interp_tstate_head", offsetof(PyInterpreterState, threads.head));
#endif
  P("tstate_next", offsetof(PyThreadState, next));
#if PY_VERSION_HEX >= 0x030C0000
  P("tstate_interp", offsetof(PyThreadState, interp));
  P("interp_id", offsetof(PyInterpreterState, id));
  P("tstate_status", offsetof(PyThreadState, _status));
  {
    /* The bit of _status that says "the thread's current thread state". */
    PyThreadState t;
    unsigned int word;
    memset(&t, 0, sizeof(t));
    t._status.active = 1;
    memcpy(&word, (char*)&t + offsetof(PyThreadState, _status), sizeof(word));
    P("tstate_active_mask", word);
  }
#else
  P("tstate_interp", NONE);
  P("interp_id", NONE);
  P("tstate_status", NONE);
  P("tstate_active_mask", 0);
#endif
  P("tstate_thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030B0000
  P("tstate_native_thread_id", offsetof(PyThreadState, native_thread_id));
#else
  P("tstate_native_thread_id", NONE);
#endif
#if PY_VERSION_HEX < 0x030B0000
  P("tstate_frame", offsetof(PyThreadState, frame));
  P("cframe_current_frame", NONE);
  P("frame_previous", offsetof(PyFrameObject, f_back));
  P("frame_code", offsetof(PyFrameObject, f_code));
  P("frame_instr", offsetof(PyFrameObject, f_lasti));
  P("frame_owner", NONE);
#elif PY_VERSION_HEX < 0x030D0000
  P("tstate_frame", offsetof(PyThreadState, cframe));
  P("cframe_current_frame", offsetof(_PyCFrame, current_frame));
  P("frame_previous", offsetof(_PyInterpreterFrame, previous));
  P("frame_code", offsetof(_PyInterpreterFrame, f_code));
  P("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
  P("frame_owner", offsetof(_PyInterpreterFrame, owner));
#else
  P("tstate_frame", offsetof(PyThreadState, current_frame));
  P("cframe_current_frame", NONE);
  P("frame_previous", offsetof(_PyInterpreterFrame, previous));
  P("frame_code", offsetof(_PyInterpreterFrame, f_executable));
  P("frame_instr", offsetof(_PyInterpreterFrame, instr_ptr));
  P("frame_owner", offsetof(_PyInterpreterFrame, owner));
#endif
#if PY_VERSION_HEX >= 0x030E0000
  /* The entry shim is the interpreter's own frame from 3.14 on. */
  P("frame_owner_cstack", FRAME_OWNED_BY_INTERPRETER);
#elif PY_VERSION_HEX >= 0x030C0000
  P("frame_owner_cstack", FRAME_OWNED_BY_CSTACK);
#else
  P("frame_owner_cstack", 0xff);
#endif
  P("code_filename", offsetof(PyCodeObject, co_filename));
  P("code_name", offsetof(PyCodeObject, co_name));
#if PY_VERSION_HEX >= 0x030B0000
  P("code_qualname", offsetof(PyCodeObject, co_qualname));
#else
  P("code_qualname", NONE);
#endif
  P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX < 0x030A0000
  P("code_linetable", offsetof(PyCodeObject, co_lnotab));
#else
  P("code_linetable", offsetof(PyCodeObject, co_linetable));
#endif
#if PY_VERSION_HEX < 0x030B0000
  P("code_code", offsetof(PyCodeObject, co_code));
  P("code_code_adaptive", NONE);
#else
  P("code_code", NONE);
  P("code_code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#endif
#if PY_VERSION_HEX >= 0x030E0000
  P("frame_code_tagged", 1);
#else
  P("frame_code_tagged", 0);
#endif
#if defined(Py_GIL_DISABLED) && PY_VERSION_HEX >= 0x030E0000
  P("frame_tlbc_index", offsetof(_PyInterpreterFrame, tlbc_index));
  P("code_tlbc", offsetof(PyCodeObject, co_tlbc));
#else
  P("frame_tlbc_index", NONE);
  P("code_tlbc", NONE);
#endif
#ifdef Py_GIL_DISABLED
  P("free_threaded", 1);
  P("gil_enabled", offsetof(struct _gil_runtime_state, enabled));
#else
  P("free_threaded", 0);
  P("gil_enabled", NONE);
#endif
  P("object_type", offsetof(PyObject, ob_type));
  P("var_object_size", offsetof(PyVarObject, ob_size));
#if PY_MAJOR_VERSION == 2
  /* co_name and co_filename are byte strings. */
  P("names_are_bytes", 1);
  P("bytes_data", offsetof(PyStringObject, ob_sval));
  P("unicode_length", NONE);
  P("unicode_state", NONE);
  P("unicode_ascii_data", NONE);
  P("unicode_compact_data", NONE);
  P("unicode_kind_shift", 0);
  P("unicode_compact_shift", 0);
  P("unicode_ascii_shift", 0);
  return 0;
}
#else
  P("names_are_bytes", 0);
  P("bytes_data", offsetof(PyBytesObject, ob_sval));
  P("unicode_length", offsetof(PyASCIIObject, length));
  P("unicode_state", offsetof(PyASCIIObject, state));
  P("unicode_ascii_data", sizeof(PyASCIIObject));
  P("unicode_compact_data", sizeof(PyCompactUnicodeObject));
  P("unicode_kind_shift", unicode_state_shift(0));
  P("unicode_compact_shift", unicode_state_shift(1));
  P("unicode_ascii_shift", unicode_state_shift(2));
  return 0;
}
#endif

// Where CPython keeps the parts of ordinary objects that the asyncio reader
// follows (dicts, sets, weakrefs, coroutines, bound methods, _asyncio tasks),
// per version. Unlike PythonLayout none of this goes to the kernel.
#ifndef PYSTROBE_DAEMON_PYTHON_OBJECT_LAYOUT_H_
#define PYSTROBE_DAEMON_PYTHON_OBJECT_LAYOUT_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/python/python_offsets.h"

namespace pystrobe {

// A field this version does not have.
inline constexpr uint32_t kNoObjectField = 0xffffffffu;

struct PythonObjectLayout {
  int minor = 0;
  bool free_threaded = false;  // --disable-gil (3.13t+): every object header 16 bytes longer
  // PyInterpreterState.modules (3.12+: imports.modules): sys.modules.
  uint32_t interp_modules = kNoObjectField;
  // PyTypeObject.
  uint32_t type_name = 24, type_basicsize = 32, type_flags = 168, type_base = 256,
           type_dictoffset = 288;
  uint32_t heaptype_cached_keys = kNoObjectField;  // PyHeapTypeObject.ht_cached_keys
  uint32_t module_dict = 16;                       // PyModuleObject.md_dict
  // PyDictObject and its keys: 3.8-3.10 store dk_size, 3.11+ log2 sizes and a kind.
  uint32_t dict_used = 16, dict_keys = 32, dict_values = 40;
  uint32_t dictkeys_size = kNoObjectField, dictkeys_log2_size = kNoObjectField,
           dictkeys_log2_index_bytes = kNoObjectField, dictkeys_kind = kNoObjectField;
  uint32_t dictkeys_nentries = 0, dictkeys_indices = 0;
  uint32_t dictkeyentry_size = 24;                  // {hash, key, value}
  uint32_t dictunicodeentry_size = kNoObjectField;  // {key, value} (3.11+)
  uint32_t dictvalues_values = 0;                   // PyDictValues.values (3.13: after a header)
  uint32_t set_used = 24, set_mask = 32, set_table = 40;
  uint32_t weakref_object = 16;  // PyWeakReference.wr_object
  uint32_t list_items = 24, tuple_items = 24;
  uint32_t cell_ref = 16;
  // Where a managed __dict__ (3.11+) sits before its object: behind the GC
  // header in a GIL build, right before the object in a free-threaded one.
  int32_t managed_dict = -24;
  uint32_t function_closure = 0;
  uint32_t method_self = 24;     // PyMethodObject.im_self
  uint32_t cfunction_self = 24;  // PyCFunctionObject.m_self
  // Generators and coroutines: a frame object pointer up to 3.10, an embedded
  // _PyInterpreterFrame and a frame state from 3.11.
  uint32_t gen_frame = kNoObjectField, gen_iframe = kNoObjectField,
           gen_frame_state = kNoObjectField;
  // The value stack: PyFrameObject.f_valuestack (3.8-3.10) or
  // _PyInterpreterFrame.localsplus (3.11+); its top: f_stacktop (a pointer,
  // 3.8-3.9) or a depth (f_stackdepth 3.10, stacktop 3.11+).
  uint32_t frame_stack = 0, frame_stacktop = kNoObjectField, frame_stackdepth = kNoObjectField;
  // Which value-stack slot from the top holds what a coroutine suspended in
  // an await is awaiting: the top until 3.14; 3.15 keeps the value sent into
  // it above (the second from the top, as its _PyGen_yf reads it).
  uint32_t yield_from_depth = 1;
  // _asyncio.Future / _asyncio.Task (Modules/_asynciomodule.c; in no header).
  uint32_t future_loop = 16, future_callback0 = 24, future_callbacks = 40, future_state = 0;
  uint32_t task_fut_waiter = 0, task_coro = 0, task_name = 0;
};

// The table for 3.<minor>, 8 to 15 (free-threaded: 13 to 15); Unimplemented
// for the others.
absl::StatusOr<PythonObjectLayout> PythonObjectLayoutForVersion(const PythonVersion& version,
                                                                bool free_threaded = false);

// The table for `layout`'s version, with what the interpreter's own
// _Py_DebugOffsets say (3.13+: where sys.modules is) in place of the table's.
absl::StatusOr<PythonObjectLayout> PythonObjectLayoutFor(const PythonVersion& version,
                                                         const PythonLayout& layout);

// (name, value) of the fields that tests/workloads/python/print_object_offsets.c
// prints from a version's headers, with the same names.
std::vector<std::pair<std::string_view, uint64_t>> PythonObjectLayoutHeaderFields(
    const PythonObjectLayout& layout);

// (name, value) of the _asyncio task fields, with the names
// tests/workloads/python/probe_task_layout.py prints from live tasks.
std::vector<std::pair<std::string_view, uint64_t>> PythonObjectLayoutTaskFields(
    const PythonObjectLayout& layout);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_OBJECT_LAYOUT_H_

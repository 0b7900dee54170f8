#include "daemon/python/object_layout.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pystrobe {
namespace {

PythonObjectLayout Layout(int minor) {
  PythonObjectLayout l;
  l.minor = minor;
  if (minor <= 10) {
    // Include/cpython/dictobject.h + Objects/dict-common.h, 3.8-3.10.
    l.dictkeys_size = 8;
    l.dictkeys_nentries = 32;
    l.dictkeys_indices = 40;
    l.gen_frame = 16;
    l.frame_stack = 64;
  } else {
    l.dictkeys_log2_size = 8;
    l.dictkeys_log2_index_bytes = 9;
    l.dictkeys_kind = 10;
    l.dictkeys_nentries = 24;
    l.dictkeys_indices = 32;
    l.dictunicodeentry_size = 16;
    l.frame_stack = 72;
    l.frame_stackdepth = 64;
  }
  // Values from each version's headers (print_object_offsets.c) and, for
  // the task, from live tasks (probe_task_layout.py): 3.8.18, 3.9.18,
  // 3.10.13, 3.11.7 (and Debian's 3.11.2), 3.12.1, 3.13.0, 3.14.10,
  // 3.15.2, x86_64; GIL builds only.
  switch (minor) {
    case 8:
      l.interp_modules = 56;
      l.heaptype_cached_keys = 872;
      l.function_closure = 48;
      l.frame_stacktop = 72;
      l.future_state = 72;
      l.task_fut_waiter = 104;
      l.task_coro = 112;
      l.task_name = 120;
      break;
    case 9:
      l.interp_modules = 856;
      l.heaptype_cached_keys = 864;
      l.function_closure = 48;
      l.frame_stacktop = 72;
      l.future_state = 80;
      l.task_fut_waiter = 144;
      l.task_coro = 152;
      l.task_name = 160;
      break;
    case 10:
      l.interp_modules = 856;
      l.heaptype_cached_keys = 872;
      l.function_closure = 72;
      l.frame_stackdepth = 80;
      l.future_state = 88;
      l.task_fut_waiter = 152;
      l.task_coro = 160;
      l.task_name = 168;
      break;
    case 11:
      l.interp_modules = 888;
      l.heaptype_cached_keys = 872;
      l.function_closure = 72;
      l.gen_iframe = 80;
      l.gen_frame_state = 75;
      l.future_state = 88;
      l.task_fut_waiter = 128;
      l.task_coro = 136;
      l.task_name = 144;
      break;
    case 12:
      l.interp_modules = 944;
      l.heaptype_cached_keys = 880;
      l.function_closure = 72;
      l.gen_iframe = 72;
      l.gen_frame_state = 67;
      l.future_state = 88;
      l.task_fut_waiter = 128;
      l.task_coro = 136;
      l.task_name = 144;
      break;
    case 13:
      l.interp_modules = 7656;
      l.heaptype_cached_keys = 880;
      l.function_closure = 72;
      l.gen_iframe = 72;
      l.gen_frame_state = 67;
      l.dictvalues_values = 8;
      l.future_state = 96;
      l.task_fut_waiter = 112;
      l.task_coro = 120;
      l.task_name = 128;
      break;
    case 14:
    case 15:
      // Debian unstable's 3.14.10 and 3.15.2. 3.14 caches a tuple's hash
      // before its items and keeps a frame's stack top as a pointer, NULL
      // while the frame runs, where 3.11-3.13 kept a depth.
      l.interp_modules = minor == 14 ? 7688 : 7592;
      l.heaptype_cached_keys = minor == 14 ? 880 : 888;
      l.tuple_items = 32;
      l.function_closure = 72;
      l.gen_iframe = 72;
      l.gen_frame_state = 67;
      l.dictvalues_values = 8;
      l.frame_stack = 80;
      l.frame_stacktop = 64;
      l.frame_stackdepth = kNoObjectField;
      l.yield_from_depth = minor == 14 ? 1 : 2;
      l.future_state = 104;
      l.task_fut_waiter = 120;
      l.task_coro = 128;
      l.task_name = 136;
      break;
  }
  return l;
}

// A free-threaded build (Include/object.h under Py_GIL_DISABLED) heads every
// object with ob_tid, flags, a mutex, GC bits and two reference counts before
// ob_type: each field after the header is 16 bytes further on. Dict keys and
// values and interpreter frames have no object header and stay put. Checked
// like the GIL builds' against 3.13.15t, 3.14.7t and 3.15.0rc2t.
PythonObjectLayout FreeThreaded(PythonObjectLayout l) {
  constexpr uint32_t kLongerHeader = 16;
  for (uint32_t* field :
       {&l.type_name,        &l.type_basicsize,       &l.type_flags,      &l.type_base,
        &l.type_dictoffset,  &l.heaptype_cached_keys, &l.module_dict,     &l.dict_used,
        &l.dict_keys,        &l.dict_values,          &l.set_used,        &l.set_mask,
        &l.set_table,        &l.weakref_object,       &l.list_items,      &l.tuple_items,
        &l.cell_ref,         &l.function_closure,     &l.method_self,     &l.cfunction_self,
        &l.gen_iframe,       &l.gen_frame_state,      &l.future_loop,     &l.future_callback0,
        &l.future_callbacks, &l.future_state,         &l.task_fut_waiter, &l.task_coro,
        &l.task_name}) {
    if (*field != kNoObjectField) *field += kLongerHeader;
  }
  l.free_threaded = true;
  l.managed_dict = -8;  // no GC header before the object
  // The interpreter state holds per-thread and per-object locks in between.
  if (l.minor == 13) l.interp_modules = 7664;
  if (l.minor == 14) l.interp_modules = 7712;
  return l;
}

}  // namespace

absl::StatusOr<PythonObjectLayout> PythonObjectLayoutForVersion(const PythonVersion& version,
                                                                bool free_threaded) {
  // asyncio's objects are read on 3.8+ only; free-threaded builds began with 3.13.
  if (!IsSupportedPythonVersion(version) || version.major != 3 || version.minor < 8 ||
      (free_threaded && version.minor < 13)) {
    return absl::UnimplementedError(absl::StrCat("no object layout for CPython ",
                                                 version.ToString(),
                                                 free_threaded ? " free-threaded" : ""));
  }
  PythonObjectLayout layout = Layout(version.minor);
  return free_threaded ? FreeThreaded(layout) : layout;
}

absl::StatusOr<PythonObjectLayout> PythonObjectLayoutFor(const PythonVersion& version,
                                                         const PythonLayout& layout) {
  absl::StatusOr<PythonObjectLayout> objects =
      PythonObjectLayoutForVersion(version, layout.abi.free_threaded);
  if (objects.ok() && layout.interp_modules != PYSTROBE_PY_OFFSET_NONE) {
    objects->interp_modules = layout.interp_modules;
  }
  return objects;
}

std::vector<std::pair<std::string_view, uint64_t>> PythonObjectLayoutHeaderFields(
    const PythonObjectLayout& l) {
  return {
      {"version_minor", static_cast<uint64_t>(l.minor)},
      {"interp_modules", l.interp_modules},
      {"type_name", l.type_name},
      {"type_basicsize", l.type_basicsize},
      {"type_flags", l.type_flags},
      {"type_base", l.type_base},
      {"type_dictoffset", l.type_dictoffset},
      {"heaptype_cached_keys", l.heaptype_cached_keys},
      {"module_dict", l.module_dict},
      {"dict_used", l.dict_used},
      {"dict_keys", l.dict_keys},
      {"dict_values", l.dict_values},
      {"dictkeys_log2_size", l.dictkeys_log2_size},
      {"dictkeys_size", l.dictkeys_size},
      {"dictkeys_kind", l.dictkeys_kind},
      {"dictkeys_log2_index_bytes", l.dictkeys_log2_index_bytes},
      {"dictkeys_nentries", l.dictkeys_nentries},
      {"dictkeys_indices", l.dictkeys_indices},
      {"dictkeyentry_size", l.dictkeyentry_size},
      {"dictunicodeentry_size", l.dictunicodeentry_size},
      {"dictvalues_values", l.dictvalues_values},
      {"set_used", l.set_used},
      {"set_mask", l.set_mask},
      {"set_table", l.set_table},
      {"weakref_object", l.weakref_object},
      {"list_items", l.list_items},
      {"tuple_items", l.tuple_items},
      {"cell_ref", l.cell_ref},
      {"function_closure", l.function_closure},
      {"method_self", l.method_self},
      {"cfunction_self", l.cfunction_self},
      {"gen_frame", l.gen_frame},
      {"gen_iframe", l.gen_iframe},
      {"gen_frame_state", l.gen_frame_state},
      {"frame_stack", l.frame_stack},
      {"frame_stacktop", l.frame_stacktop},
      {"frame_stackdepth", l.frame_stackdepth},
  };
}

std::vector<std::pair<std::string_view, uint64_t>> PythonObjectLayoutTaskFields(
    const PythonObjectLayout& l) {
  return {
      {"future_loop", l.future_loop},
      {"future_callback0", l.future_callback0},
      {"future_callbacks", l.future_callbacks},
      {"future_state", l.future_state},
      {"task_fut_waiter", l.task_fut_waiter},
      {"task_coro", l.task_coro},
      {"task_name", l.task_name},
  };
}

}  // namespace pystrobe

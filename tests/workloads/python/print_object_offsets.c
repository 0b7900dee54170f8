/*
 * Prints, as "name=value" lines, the CPython object layouts that pystrobe's
 * asyncio reader (daemon/python/object_layout.cc) claims for this interpreter
 * version: dicts, sets, weakrefs, generators and coroutines, heap types,
 * cells, bound methods. Compiled by tests/unit/python/object_layout_test.cc
 * against each installed version's own headers (with -DPy_BUILD_CORE).
 * Not product code. _asyncio's TaskObj is not in any header: its layout is
 * checked against live tasks by tests/workloads/python/probe_task_layout.py.
 */
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>
#include <stdio.h>

#if PY_VERSION_HEX >= 0x03090000
#include "internal/pycore_interp.h"
#endif
#include "internal/pycore_pystate.h"
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#endif
#if PY_VERSION_HEX >= 0x030D0000
#include "internal/pycore_genobject.h"
#endif
#if PY_VERSION_HEX >= 0x030E0000
#include "internal/pycore_interpframe.h"
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_dict.h"
#endif
#if PY_VERSION_HEX >= 0x030C0000
#include "internal/pycore_moduleobject.h"
#endif
#if PY_VERSION_HEX < 0x030B0000
/* dict-common.h is not installed before 3.11: its layout, from Objects/dict-common.h. */
typedef struct {
  Py_hash_t me_hash;
  PyObject* me_key;
  PyObject* me_value;
} PyDictKeyEntry;
struct _dictkeysobject {
  Py_ssize_t dk_refcnt;
  Py_ssize_t dk_size;
  void* dk_lookup;
  Py_ssize_t dk_usable;
  Py_ssize_t dk_nentries;
  char dk_indices[];
};
#endif
#if PY_VERSION_HEX < 0x030C0000
typedef struct {
  PyObject_HEAD PyObject* md_dict;
} PyModuleObject;
#endif

#define P(name, value) printf("%s=%lu\n", name, (unsigned long)(value))

int main(void) {
  P("version_minor", PY_MINOR_VERSION);
#if PY_VERSION_HEX >= 0x030C0000
  P("interp_modules", offsetof(PyInterpreterState, imports.modules));
#else
  P("interp_modules", offsetof(PyInterpreterState, modules));
#endif
  P("type_name", offsetof(PyTypeObject, tp_name));
  P("type_basicsize", offsetof(PyTypeObject, tp_basicsize));
  P("type_flags", offsetof(PyTypeObject, tp_flags));
  P("type_base", offsetof(PyTypeObject, tp_base));
  P("type_dictoffset", offsetof(PyTypeObject, tp_dictoffset));
  P("heaptype_cached_keys", offsetof(PyHeapTypeObject, ht_cached_keys));
  P("module_dict", offsetof(PyModuleObject, md_dict));
  P("dict_used", offsetof(PyDictObject, ma_used));
  P("dict_keys", offsetof(PyDictObject, ma_keys));
  P("dict_values", offsetof(PyDictObject, ma_values));
#if PY_VERSION_HEX < 0x030B0000
  P("dictkeys_log2_size", 0xffffffffUL);
  P("dictkeys_size", offsetof(PyDictKeysObject, dk_size));
  P("dictkeys_kind", 0xffffffffUL);
#else
  P("dictkeys_log2_size", offsetof(PyDictKeysObject, dk_log2_size));
  P("dictkeys_size", 0xffffffffUL);
  P("dictkeys_kind", offsetof(PyDictKeysObject, dk_kind));
#endif
#if PY_VERSION_HEX >= 0x030B0000
  P("dictkeys_log2_index_bytes", offsetof(PyDictKeysObject, dk_log2_index_bytes));
#else
  P("dictkeys_log2_index_bytes", 0xffffffffUL);
#endif
  P("dictkeys_nentries", offsetof(PyDictKeysObject, dk_nentries));
  P("dictkeys_indices", offsetof(PyDictKeysObject, dk_indices));
  P("dictkeyentry_size", sizeof(PyDictKeyEntry));
#if PY_VERSION_HEX >= 0x030B0000
  P("dictunicodeentry_size", sizeof(PyDictUnicodeEntry));
#else
  P("dictunicodeentry_size", 0xffffffffUL);
#endif
#if PY_VERSION_HEX >= 0x030D0000
  P("dictvalues_values", offsetof(PyDictValues, values));
#else
  P("dictvalues_values", 0);
#endif
  P("set_used", offsetof(PySetObject, used));
  P("set_mask", offsetof(PySetObject, mask));
  P("set_table", offsetof(PySetObject, table));
  P("weakref_object", offsetof(PyWeakReference, wr_object));
  P("list_items", offsetof(PyListObject, ob_item));
  P("tuple_items", offsetof(PyTupleObject, ob_item));
  P("cell_ref", offsetof(PyCellObject, ob_ref));
  P("function_closure", offsetof(PyFunctionObject, func_closure));
  P("method_self", offsetof(PyMethodObject, im_self));
  P("cfunction_self", offsetof(PyCFunctionObject, m_self));
#if PY_VERSION_HEX < 0x030B0000
  P("gen_frame", offsetof(PyGenObject, gi_frame));
  P("gen_iframe", 0xffffffffUL);
  P("gen_frame_state", 0xffffffffUL);
  P("frame_stack", offsetof(PyFrameObject, f_valuestack));
#if PY_VERSION_HEX < 0x030A0000
  P("frame_stacktop", offsetof(PyFrameObject, f_stacktop));
  P("frame_stackdepth", 0xffffffffUL);
#else
  P("frame_stacktop", 0xffffffffUL);
  P("frame_stackdepth", offsetof(PyFrameObject, f_stackdepth));
#endif
#else
  P("gen_frame", 0xffffffffUL);
  P("gen_iframe", offsetof(PyGenObject, gi_iframe));
  P("gen_frame_state", offsetof(PyGenObject, gi_frame_state));
  P("frame_stack", offsetof(_PyInterpreterFrame, localsplus));
#if PY_VERSION_HEX >= 0x030E0000
  /* 3.14: a pointer past the top, NULL while the frame runs. */
  P("frame_stacktop", offsetof(_PyInterpreterFrame, stackpointer));
  P("frame_stackdepth", 0xffffffffUL);
#else
  P("frame_stacktop", 0xffffffffUL);
  P("frame_stackdepth", offsetof(_PyInterpreterFrame, stacktop));
#endif
#endif
  return 0;
}

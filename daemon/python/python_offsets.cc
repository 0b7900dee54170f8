#include "daemon/python/python_offsets.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pystrobe {
namespace {

// struct _gil_runtime_state starts { interval, last_holder, locked,
// switch_number, cond, mutex, ... } in 3.7 to 3.13: cond is at 32 on x86_64,
// and cond and mutex take 88 bytes. Checked against each version's headers
// by python_offsets_test.
constexpr uint32_t kGilCondOffset = 32;
constexpr uint32_t kGilCondOffsetFreeThreaded = 40;  // after `int enabled` and padding
constexpr uint8_t kGilWaitSpan = 88;
// Where PyASCIIObject.state.kind starts in a free-threaded 3.14+ build.
constexpr uint8_t kUnicodeKindShiftFreeThreaded = 8;

constexpr uint32_t kNone = PYSTROBE_PY_OFFSET_NONE;

// How a version's code objects hold their names.
enum class NameStrings {
  kUnicode,     // 3.x: compact str (PyASCIIObject)
  kByteString,  // 2.7: PyStringObject
};

// One column of the offsets table: the values print_offsets.c prints for a
// version, in the order of PythonLayoutFields. Versions whose roots are
// globals (2.7, 3.6) have NONE for the fields relative to them.
struct LayoutRow {
  int major, minor;
  NameStrings names;
  uint32_t runtime_interpreters_head, runtime_gil, interp_gil_ptr, gil_last_holder, gil_locked,
      gil_cond, interp_next, interp_tstate_head, tstate_next, tstate_thread_id,
      tstate_native_thread_id, tstate_frame, cframe_current_frame, frame_previous, frame_code,
      frame_instr, frame_owner, frame_owner_cstack, code_filename, code_name, code_qualname,
      code_firstlineno, code_linetable, code_code, code_code_adaptive, bytes_data,
      unicode_ascii_data, unicode_compact_data;
};

constexpr NameStrings kStr = NameStrings::kUnicode;
constexpr NameStrings kBytes = NameStrings::kByteString;

// x86_64, generated from each version's headers (2.7.18, 3.6.15, 3.7.16,
// 3.8.18, 3.9.18, 3.10.13, 3.11.7, 3.12.1, 3.13.0, Debian's 3.14.10 and
// 3.15.2) and checked by python_offsets_test. The GIL builds only: a
// free-threaded build's layout always comes from its _Py_DebugOffsets.
constexpr LayoutRow kRows[] = {
    // clang-format off
    //maj min names  rt_head rt_gil  i_gil  last   lock   cond   i_next i_tsh ts_nx  ts_tid ts_ntid ts_fr  cf_cur f_prev f_code f_instr f_own  cstack co_fn co_nm co_qn  co_fl co_lt co_cd  co_ad  b_data u_asc  u_cmp
    {2, 7,  kBytes, kNone, kNone,  kNone, kNone, kNone, kNone, 0,     8,    0,     144,   kNone,  16,    kNone, 24,    32,    120,    kNone, 0xff,  80,   88,   kNone, 96,   104,  32,    kNone, 36,    kNone, kNone},
    {3, 6,  kStr,   kNone, kNone,  kNone, kNone, kNone, kNone, 0,     8,    8,     152,   kNone,  24,    kNone, 24,    32,    120,    kNone, 0xff,  96,   104,  kNone, 36,   112,  40,    kNone, 32,    48,    72},
    {3, 7,  kStr,   24,    1264,   kNone, 8,     16,    32,    0,     8,    8,     176,   kNone,  24,    kNone, 24,    32,    104,    kNone, 0xff,  96,   104,  kNone, 36,   112,  40,    kNone, 32,    48,    72},
    {3, 8,  kStr,   32,    1152,   kNone, 8,     16,    32,    0,     8,    8,     176,   kNone,  24,    kNone, 24,    32,    104,    kNone, 0xff,  104,  112,  kNone, 40,   120,  48,    kNone, 32,    48,    72},
    {3, 9,  kStr,   32,    352,    kNone, 8,     16,    32,    0,     8,    8,     176,   kNone,  24,    kNone, 24,    32,    104,    kNone, 0xff,  104,  112,  kNone, 40,   120,  48,    kNone, 32,    48,    72},
    {3, 10, kStr,   32,    352,    kNone, 8,     16,    32,    0,     8,    8,     176,   kNone,  24,    kNone, 24,    32,    96,     kNone, 0xff,  104,  112,  kNone, 40,   120,  48,    kNone, 32,    48,    72},
    {3, 11, kStr,   40,    360,    kNone, 8,     16,    32,    0,     16,   8,     152,   160,    56,    8,     48,    32,    56,     69,    0xff,  112,  120,  128,   72,   136,  kNone, 184,   32,    48,    72},
    {3, 12, kStr,   40,    kNone,  384,   8,     16,    32,    0,     72,   8,     136,   144,    56,    0,     8,     0,     56,     70,    3,     112,  120,  128,   68,   136,  kNone, 192,   32,    40,    56},
    {3, 13, kStr,   632,   kNone,  16,    8,     16,    32,    7264,  7344, 8,     152,   160,    72,    kNone, 8,     0,     56,     70,    3,     112,  120,  128,   68,   136,  kNone, 200,   32,    40,    56},
    {3, 14, kStr,   808,   kNone,  16,    8,     16,    32,    7272,  7344, 8,     152,   160,    72,    kNone, 8,     0,     56,     74,    3,     112,  120,  128,   68,   136,  kNone, 208,   32,    40,    56},
    {3, 15, kStr,   936,   kNone,  16,    8,     16,    32,    7264,  7336, 8,     176,   184,    72,    kNone, 8,     0,     56,     74,    3,     112,  120,  128,   68,   136,  kNone, 208,   32,    40,    56},
    // clang-format on
};

uint8_t FrameModelFor(int major, int minor) {
  if (major == 2 || minor <= 9) return PYSTROBE_PY_FRAMES_OBJECT_LASTI_BYTES;
  if (minor == 10) return PYSTROBE_PY_FRAMES_OBJECT_LASTI_UNITS;
  if (minor <= 12) return PYSTROBE_PY_FRAMES_CFRAME;
  return PYSTROBE_PY_FRAMES_CURRENT_FRAME;
}

PythonLayout LayoutFromRow(const LayoutRow& row) {
  PythonLayout layout;
  pystrobe_python_offsets& o = layout.abi;
  o.major = static_cast<uint8_t>(row.major);
  o.minor = static_cast<uint8_t>(row.minor);
  o.frame_model = FrameModelFor(row.major, row.minor);
  o.frame_owner_cstack = static_cast<uint8_t>(row.frame_owner_cstack);
  o.runtime_interpreters_head = row.runtime_interpreters_head;
  o.runtime_gil = row.runtime_gil;
  o.interp_next = row.interp_next;
  o.interp_tstate_head = row.interp_tstate_head;
  o.interp_gil_ptr = row.interp_gil_ptr;
  o.gil_last_holder = row.gil_last_holder;
  o.gil_locked = row.gil_locked;
  o.gil_cond = row.gil_cond;
  o.gil_wait_span = row.gil_cond == kNone ? 0 : kGilWaitSpan;
  o.tstate_next = row.tstate_next;
  o.tstate_thread_id = row.tstate_thread_id;
  o.tstate_native_thread_id = row.tstate_native_thread_id;
  o.tstate_frame = row.tstate_frame;
  o.cframe_current_frame = row.cframe_current_frame;
  o.frame_previous = row.frame_previous;
  o.frame_code = row.frame_code;
  o.frame_instr = row.frame_instr;
  o.frame_owner = row.frame_owner;
  // 3.11's _PyInterpreterFrame: `bool is_entry; char owner;`
  // (Include/internal/pycore_frame.h); 3.12 replaced it with shim frames.
  o.frame_is_entry = row.major == 3 && row.minor == 11 ? static_cast<uint8_t>(row.frame_owner - 1)
                                                       : PYSTROBE_PY_OWNER_NONE;
  o.frame_code_tagged = row.major == 3 && row.minor >= 14;
  // PyThreadState starts { prev, next, interp } in every 3.x; only 3.12+,
  // with a GIL per interpreter, needs it.
  o.tstate_interp = row.major == 3 && row.minor >= 12 ? 16 : kNone;
  // _status follows interp (3.12) or eval_breaker (3.13+).
  o.tstate_status = row.major == 3 && row.minor >= 12 ? (row.minor == 12 ? 24 : 32) : kNone;
  // PyInterpreterState's id follows next (3.12+, as the headers say).
  o.interp_id = row.major == 3 && row.minor >= 12 ? row.interp_next + 8 : kNone;
  o.frame_tlbc_index = kNone;
  o.code_tlbc = kNone;
  o.gil_enabled = kNone;
  o.code_filename = row.code_filename;
  o.code_name = row.code_name;
  o.code_qualname = row.code_qualname;
  o.code_firstlineno = row.code_firstlineno;
  o.code_linetable = row.code_linetable;
  o.code_code = row.code_code;
  o.code_code_adaptive = row.code_code_adaptive;
  o.object_type = 8;
  o.var_object_size = 16;
  o.bytes_data = row.bytes_data;
  o.unicode_ascii_data = row.unicode_ascii_data;
  o.unicode_compact_data = row.unicode_compact_data;
  if (row.names == NameStrings::kByteString) {
    o.names_are_bytes = 1;
    o.unicode_length = kNone;
    o.unicode_state = kNone;
  } else {
    o.unicode_length = 16;
    o.unicode_state = 32;
    o.unicode_kind_shift = 2;
    o.unicode_compact_shift = 5;
    o.unicode_ascii_shift = 6;
  }
  return layout;
}

// _Py_DebugOffsets as each version lays it out: 3.13's
// Include/internal/pycore_runtime.h, 3.14's and 3.15's
// Include/internal/pycore_debug_offsets.h. Every field is a uint64_t; the
// sections a version added or grew are spelled out per version, and
// tests/unit/python/python_offsets_test.cc checks these against the
// _Py_DebugOffsets_INIT of each version's own headers.
struct Sized2 {
  uint64_t size, a;
};
struct TypeObject313 {
  uint64_t size, tp_name, tp_repr, tp_flags;
};
struct ItemsObject {  // tuple, list
  uint64_t size, ob_item, ob_size;
};
struct DictObject {
  uint64_t size, ma_keys, ma_values;
};
struct LongObject {
  uint64_t size, lv_tag, ob_digit;
};
struct BytesObject {
  uint64_t size, ob_size, ob_sval;
};
struct RuntimeState {
  uint64_t size, finalizing, interpreters_head;
};

struct DebugOffsets313 {
  char cookie[8];
  uint64_t version;
  uint64_t free_threaded;
  RuntimeState runtime_state;
  struct {
    uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
        gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
        gil_runtime_state_holder;
  } interpreter_state;
  struct {
    uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk,
        status;
  } thread_state;
  struct {
    uint64_t size, previous, executable, instr_ptr, localsplus, owner;
  } interpreter_frame;
  struct {
    uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
        localspluskinds, co_code_adaptive;
  } code_object;
  struct {
    uint64_t size, ob_type;
  } pyobject;
  TypeObject313 type_object;
  ItemsObject tuple_object, list_object;
  DictObject dict_object;
  Sized2 float_object;
  LongObject long_object;
  BytesObject bytes_object;
  struct {
    uint64_t size, state, length, asciiobject_size;
  } unicode_object;
  Sized2 gc;
};
static_assert(sizeof(DebugOffsets313) == kPythonDebugOffsets313Size);

// 3.14: threads_main, code_object_generation, tlbc_generation, stackpointer,
// tlbc_index, co_tlbc, set, generator, llist and debugger sections.
struct InterpreterState314 {
  uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict, builtins,
      ceval_gil, gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked,
      gil_runtime_state_holder, code_object_generation, tlbc_generation;
};
struct InterpreterFrame314 {
  uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index;
};
struct CodeObject314 {
  uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
      localspluskinds, co_code_adaptive, co_tlbc;
};
struct SetObject {
  uint64_t size, used, table, mask;
};
struct GenObject {
  uint64_t size, gi_name, gi_iframe, gi_frame_state;
};
struct Tail314 {  // llist_node and debugger_support
  uint64_t llist_next, llist_prev, eval_breaker, remote_debugger_support, remote_debugging_enabled,
      debugger_pending_call, debugger_script_path, debugger_script_path_size;
};

struct DebugOffsets314 {
  char cookie[8];
  uint64_t version;
  uint64_t free_threaded;
  RuntimeState runtime_state;
  InterpreterState314 interpreter_state;
  struct {
    uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk,
        status;
  } thread_state;
  InterpreterFrame314 interpreter_frame;
  CodeObject314 code_object;
  struct {
    uint64_t size, ob_type;
  } pyobject;
  TypeObject313 type_object;
  ItemsObject tuple_object, list_object;
  SetObject set_object;
  DictObject dict_object;
  Sized2 float_object;
  LongObject long_object;
  BytesObject bytes_object;
  struct {
    uint64_t size, state, length, asciiobject_size;
  } unicode_object;
  Sized2 gc;
  GenObject gen_object;
  Tail314 tail;
};
static_assert(sizeof(DebugOffsets314) == kPythonDebugOffsets314Size);

// 3.15: a longer thread state, err_stackitem, the type object's basicsize and
// dictoffset, heap types, compactunicodeobject_size and more of the GC.
struct DebugOffsets315 {
  char cookie[8];
  uint64_t version;
  uint64_t free_threaded;
  RuntimeState runtime_state;
  InterpreterState314 interpreter_state;
  struct {
    uint64_t size, prev, next, interp, current_frame, base_frame, last_profiled_frame,
        last_profiled_frame_seq, thread_id, native_thread_id, datastack_chunk, status, holds_gil,
        gil_requested, current_exception, exc_state;
  } thread_state;
  struct {
    uint64_t exc_value;
  } err_stackitem;
  InterpreterFrame314 interpreter_frame;
  CodeObject314 code_object;
  struct {
    uint64_t size, ob_type;
  } pyobject;
  struct {
    uint64_t size, tp_name, tp_repr, tp_flags, tp_basicsize, tp_dictoffset;
  } type_object;
  Sized2 heap_type_object;
  ItemsObject tuple_object, list_object;
  SetObject set_object;
  DictObject dict_object;
  Sized2 float_object;
  LongObject long_object;
  BytesObject bytes_object;
  struct {
    uint64_t size, state, length, asciiobject_size, compactunicodeobject_size;
  } unicode_object;
  struct {
    uint64_t size, collecting, frame, generation_stats_size, generation_stats;
  } gc;
  GenObject gen_object;
  Tail314 tail;
};
static_assert(sizeof(DebugOffsets315) == kPythonDebugOffsets315Size);

// Offsets inside the structures we read stay far below 64 KiB; anything
// larger means the blob is not what we think it is.
absl::StatusOr<uint32_t> SmallOffset(uint64_t value, std::string_view name) {
  if (value >= (1u << 16)) {
    return absl::DataLossError(
        absl::StrCat("_Py_DebugOffsets: implausible offset ", value, " for ", std::string(name)));
  }
  return static_cast<uint32_t>(value);
}

}  // namespace

std::string PythonVersion::ToString() const {
  if (micro < 0) return absl::StrCat(major, ".", minor);
  return absl::StrCat(major, ".", minor, ".", micro);
}

PythonVersion PythonVersionFromHex(uint64_t hex) {
  return PythonVersion{static_cast<int>((hex >> 24) & 0xff), static_cast<int>((hex >> 16) & 0xff),
                       static_cast<int>((hex >> 8) & 0xff)};
}

bool IsSupportedPythonVersion(const PythonVersion& version) {
  for (const LayoutRow& row : kRows) {
    if (row.major == version.major && row.minor == version.minor) return true;
  }
  return false;
}

bool PythonVersionHasGlobalRoots(const PythonVersion& version) {
  return version.major == 2 || (version.major == 3 && version.minor < 7);
}

absl::StatusOr<PythonLayout> PythonLayoutForVersion(const PythonVersion& version) {
  for (const LayoutRow& row : kRows) {
    if (row.major == version.major && row.minor == version.minor) return LayoutFromRow(row);
  }
  return absl::UnimplementedError(absl::StrCat("CPython ", version.ToString(),
                                               " is not supported (pystrobe supports ",
                                               kSupportedPythonVersions, ")"));
}

absl::StatusOr<uint64_t> PlacePythonGlobals(const PythonGlobals& globals, PythonLayout& layout) {
  if (globals.interp_head == 0 || globals.thread_state_current == 0) {
    return absl::InvalidArgumentError("interp_head or _PyThreadState_Current not found");
  }
  const bool has_wait = globals.gil_wait_start != 0 &&
                        globals.gil_wait_end > globals.gil_wait_start &&
                        globals.gil_wait_end - globals.gil_wait_start <= 0xff;
  uint64_t base = std::min(globals.interp_head, globals.thread_state_current);
  if (has_wait) base = std::min(base, globals.gil_wait_start);
  auto offset = [base](uint64_t address) -> absl::StatusOr<uint32_t> {
    // Globals of one binary lie within its data segment.
    if (address - base >= (uint64_t{1} << 31)) {
      return absl::InvalidArgumentError("interpreter globals lie too far apart");
    }
    return static_cast<uint32_t>(address - base);
  };
  pystrobe_python_offsets& o = layout.abi;
  absl::StatusOr<uint32_t> head = offset(globals.interp_head);
  absl::StatusOr<uint32_t> current = offset(globals.thread_state_current);
  if (!head.ok()) return head.status();
  if (!current.ok()) return current.status();
  o.runtime_interpreters_head = *head;
  // The "GIL state" is the base itself; its holder is _PyThreadState_Current,
  // with no separate locked flag (see step 6 in bpf/pystrobe_abi.h).
  o.runtime_gil = 0;
  o.interp_gil_ptr = kNone;
  o.gil_last_holder = *current;
  o.gil_locked = kNone;
  o.gil_cond = kNone;
  o.gil_wait_span = 0;
  o.gil_wait_indirect = 0;
  if (has_wait) {
    absl::StatusOr<uint32_t> wait = offset(globals.gil_wait_start);
    if (!wait.ok()) return wait.status();
    o.gil_cond = *wait;
    o.gil_wait_span = static_cast<uint8_t>(globals.gil_wait_end - globals.gil_wait_start);
    o.gil_wait_indirect = globals.gil_wait_indirect ? 1 : 0;
  }
  return base;
}

absl::StatusOr<uint64_t> PythonDebugOffsetsVersion(absl::Span<const uint8_t> debug_offsets) {
  if (debug_offsets.size() < 16 ||
      std::memcmp(debug_offsets.data(), kPythonDebugOffsetsCookie.data(), 8) != 0) {
    return absl::NotFoundError("no _Py_DebugOffsets cookie at the start of _PyRuntime");
  }
  uint64_t version;
  std::memcpy(&version, debug_offsets.data() + 8, sizeof(version));
  return version;
}

absl::StatusOr<size_t> PythonDebugOffsetsSize(const PythonVersion& version) {
  if (version.major == 3) {
    switch (version.minor) {
      case 13:
        return kPythonDebugOffsets313Size;
      case 14:
        return kPythonDebugOffsets314Size;
      case 15:
        return kPythonDebugOffsets315Size;
    }
  }
  return absl::UnimplementedError(absl::StrCat("_Py_DebugOffsets of CPython ", version.ToString(),
                                               ": only 3.13 to 3.15 are understood"));
}

namespace {

// An offset of a field inside a structure of `size` bytes that the debug
// offsets themselves give: a field past its structure's end means the blob
// is not the layout we think it is.
absl::StatusOr<uint32_t> FieldOffset(uint64_t value, uint64_t size, std::string_view name) {
  absl::StatusOr<uint32_t> offset = SmallOffset(value, name);
  if (!offset.ok()) return offset.status();
  if (size != 0 && value >= size) {
    return absl::DataLossError(absl::StrCat("_Py_DebugOffsets: ", std::string(name), " at ", value,
                                            " lies outside its structure of ", size, " bytes"));
  }
  return offset;
}

// A PythonLayout from the debug offsets `d` of one version's layout (D is
// DebugOffsets313, 314 or 315); the fields they do not carry come from the
// version's table row (GIL builds) or are the free-threaded build's own.
template <typename D>
absl::StatusOr<PythonLayout> LayoutFromDebugOffsets(const D& d, const PythonVersion& version) {
  constexpr bool k314 = requires { d.code_object.co_tlbc; };
  if (d.free_threaded > 1) {
    return absl::DataLossError(
        absl::StrCat("_Py_DebugOffsets: free_threaded is ", d.free_threaded, ", not 0 or 1"));
  }
  const bool free_threaded = d.free_threaded == 1;
  absl::StatusOr<PythonLayout> base = PythonLayoutForVersion(version);
  if (!base.ok()) return base.status();
  PythonLayout layout = *base;
  pystrobe_python_offsets& o = layout.abi;
  // The GIL lives inline in the interpreter (_gil); ceval.gil points at it.
  const auto& interp = d.interpreter_state;
  if (interp.gil_runtime_state_holder < interp.gil_runtime_state ||
      interp.gil_runtime_state_locked < interp.gil_runtime_state) {
    return absl::DataLossError("_Py_DebugOffsets: GIL fields outside the GIL state");
  }
  struct Field {
    uint32_t* target;
    uint64_t value;
    uint64_t size;  // of the structure the field is in; 0: not given
    std::string_view name;
  };
  const uint64_t frame_size = d.interpreter_frame.size, code_size = d.code_object.size,
                 tstate_size = d.thread_state.size, interp_size = interp.size;
  std::vector<Field> fields = {
      {&layout.interp_modules, interp.imports_modules, interp_size, "imports_modules"},
      {&o.runtime_interpreters_head, d.runtime_state.interpreters_head, d.runtime_state.size,
       "interpreters_head"},
      {&o.interp_next, interp.next, interp_size, "interpreter_state.next"},
      {&o.interp_id, interp.id, interp_size, "interpreter_state.id"},
      {&o.interp_tstate_head, interp.threads_head, interp_size, "threads_head"},
      {&o.interp_gil_ptr, interp.ceval_gil, interp_size, "ceval_gil"},
      {&o.gil_last_holder, interp.gil_runtime_state_holder - interp.gil_runtime_state, 0,
       "gil_runtime_state_holder"},
      {&o.gil_locked, interp.gil_runtime_state_locked - interp.gil_runtime_state, 0,
       "gil_runtime_state_locked"},
      {&o.tstate_next, d.thread_state.next, tstate_size, "thread_state.next"},
      {&o.tstate_interp, d.thread_state.interp, tstate_size, "thread_state.interp"},
      {&o.tstate_status, d.thread_state.status, tstate_size, "thread_state.status"},
      {&o.tstate_thread_id, d.thread_state.thread_id, tstate_size, "thread_id"},
      {&o.tstate_native_thread_id, d.thread_state.native_thread_id, tstate_size,
       "native_thread_id"},
      {&o.tstate_frame, d.thread_state.current_frame, tstate_size, "current_frame"},
      {&o.frame_previous, d.interpreter_frame.previous, frame_size, "previous"},
      {&o.frame_code, d.interpreter_frame.executable, frame_size, "executable"},
      {&o.frame_instr, d.interpreter_frame.instr_ptr, frame_size, "instr_ptr"},
      {&o.frame_owner, d.interpreter_frame.owner, frame_size, "owner"},
      {&o.code_filename, d.code_object.filename, code_size, "filename"},
      {&o.code_name, d.code_object.name, code_size, "name"},
      {&o.code_qualname, d.code_object.qualname, code_size, "qualname"},
      {&o.code_firstlineno, d.code_object.firstlineno, code_size, "firstlineno"},
      {&o.code_linetable, d.code_object.linetable, code_size, "linetable"},
      {&o.code_code_adaptive, d.code_object.co_code_adaptive, code_size, "co_code_adaptive"},
      {&o.object_type, d.pyobject.ob_type, d.pyobject.size, "ob_type"},
      {&o.var_object_size, d.bytes_object.ob_size, d.bytes_object.size, "bytes ob_size"},
      {&o.bytes_data, d.bytes_object.ob_sval, d.bytes_object.size, "ob_sval"},
      {&o.unicode_length, d.unicode_object.length, d.unicode_object.size, "unicode length"},
      {&o.unicode_state, d.unicode_object.state, d.unicode_object.size, "unicode state"},
      {&o.unicode_ascii_data, d.unicode_object.asciiobject_size, d.unicode_object.size + 1,
       "asciiobject_size"},
  };
  if (free_threaded) {
    // Unlike locked and holder, `enabled` is given from the GIL state's
    // start (offsetof(struct _gil_runtime_state, enabled)), in 3.13 to 3.15.
    fields.push_back({&o.gil_enabled, interp.gil_runtime_state_enabled,
                      interp.gil_runtime_state_locked - interp.gil_runtime_state,
                      "gil_runtime_state_enabled"});
  }
  if constexpr (k314) {
    if (free_threaded) {
      fields.push_back(
          {&o.frame_tlbc_index, d.interpreter_frame.tlbc_index, frame_size, "tlbc_index"});
      fields.push_back({&o.code_tlbc, d.code_object.co_tlbc, code_size, "co_tlbc"});
    }
  }
  for (const Field& field : fields) {
    absl::StatusOr<uint32_t> value = FieldOffset(field.value, field.size, field.name);
    if (!value.ok()) return value.status();
    *field.target = *value;
  }
  // PyCompactUnicodeObject adds utf8_length and utf8 to PyASCIIObject (3.12+).
  o.unicode_compact_data = o.unicode_ascii_data + 16;
  if constexpr (requires { d.unicode_object.compactunicodeobject_size; }) {
    absl::StatusOr<uint32_t> compact =
        FieldOffset(d.unicode_object.compactunicodeobject_size, d.unicode_object.size + 1,
                    "compactunicodeobject_size");
    if (!compact.ok()) return compact.status();
    o.unicode_compact_data = *compact;
  }
  // _Py_DebugOffsets says nothing of the GIL's condition variable; its place
  // is the same in every version since 3.7, after the free-threaded build's
  // `enabled`.
  o.gil_cond = free_threaded ? kGilCondOffsetFreeThreaded : kGilCondOffset;
  o.gil_wait_span = kGilWaitSpan;
  o.free_threaded = free_threaded;
  if (free_threaded && k314) {
    // The free-threaded PyASCIIObject's state gives `interned` a whole byte
    // from 3.14 on (two bits in the GIL build and in 3.13t), so kind starts
    // at bit 8.
    o.unicode_kind_shift = kUnicodeKindShiftFreeThreaded;
    o.unicode_compact_shift = kUnicodeKindShiftFreeThreaded + 3;
    o.unicode_ascii_shift = kUnicodeKindShiftFreeThreaded + 4;
  }
  return layout;
}

}  // namespace

absl::StatusOr<PythonLayout> PythonLayoutFromDebugOffsets(absl::Span<const uint8_t> debug_offsets) {
  absl::StatusOr<uint64_t> hex = PythonDebugOffsetsVersion(debug_offsets);
  if (!hex.ok()) return hex.status();
  const PythonVersion version = PythonVersionFromHex(*hex);
  absl::StatusOr<size_t> size = PythonDebugOffsetsSize(version);
  if (!size.ok()) return size.status();
  if (debug_offsets.size() < *size) {
    return absl::DataLossError(absl::StrCat("_Py_DebugOffsets of CPython ", version.ToString(),
                                            " truncated: ", debug_offsets.size(), " of ", *size,
                                            " bytes"));
  }
  auto parse = [&]<typename D>(D d) {
    std::memcpy(&d, debug_offsets.data(), sizeof(d));
    return LayoutFromDebugOffsets(d, version);
  };
  switch (version.minor) {
    case 13:
      return parse(DebugOffsets313{});
    case 14:
      return parse(DebugOffsets314{});
    default:
      return parse(DebugOffsets315{});
  }
}

std::vector<std::pair<std::string_view, uint64_t>> PythonLayoutFields(const PythonLayout& layout) {
  const pystrobe_python_offsets& o = layout.abi;
  return {
      {"version_major", o.major},
      {"version_minor", o.minor},
      {"runtime_interpreters_head", o.runtime_interpreters_head},
      {"runtime_gil", o.runtime_gil},
      {"interp_gil_ptr", o.interp_gil_ptr},
      {"gil_last_holder", o.gil_last_holder},
      {"gil_locked", o.gil_locked},
      {"interp_next", o.interp_next},
      {"interp_tstate_head", o.interp_tstate_head},
      {"tstate_next", o.tstate_next},
      {"tstate_interp", o.tstate_interp},
      {"interp_id", o.interp_id},
      {"tstate_status", o.tstate_status},
      {"tstate_active_mask", o.tstate_status == kNone ? 0u : PYSTROBE_PY_TSTATE_ACTIVE},
      {"tstate_thread_id", o.tstate_thread_id},
      {"tstate_native_thread_id", o.tstate_native_thread_id},
      {"tstate_frame", o.tstate_frame},
      {"cframe_current_frame", o.cframe_current_frame},
      {"frame_previous", o.frame_previous},
      {"frame_code", o.frame_code},
      {"frame_instr", o.frame_instr},
      {"frame_owner", o.frame_owner},
      {"frame_owner_cstack", o.frame_owner_cstack},
      {"code_filename", o.code_filename},
      {"code_name", o.code_name},
      {"code_qualname", o.code_qualname},
      {"code_firstlineno", o.code_firstlineno},
      {"code_linetable", o.code_linetable},
      {"code_code", o.code_code},
      {"code_code_adaptive", o.code_code_adaptive},
      {"frame_code_tagged", o.frame_code_tagged},
      {"frame_tlbc_index", o.frame_tlbc_index},
      {"code_tlbc", o.code_tlbc},
      {"free_threaded", o.free_threaded},
      {"gil_enabled", o.gil_enabled},
      {"object_type", o.object_type},
      {"var_object_size", o.var_object_size},
      {"bytes_data", o.bytes_data},
      {"gil_cond", o.gil_cond},
      {"gil_wait_span", o.gil_wait_span},
      {"names_are_bytes", o.names_are_bytes},
      {"unicode_length", o.unicode_length},
      {"unicode_state", o.unicode_state},
      {"unicode_ascii_data", o.unicode_ascii_data},
      {"unicode_compact_data", o.unicode_compact_data},
      {"unicode_kind_shift", o.unicode_kind_shift},
      {"unicode_compact_shift", o.unicode_compact_shift},
      {"unicode_ascii_shift", o.unicode_ascii_shift},
  };
}

}  // namespace pystrobe

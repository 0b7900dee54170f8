// CPython versions and the struct layouts pystrobe reads them with.
#ifndef PYSTROBE_DAEMON_PYTHON_PYTHON_OFFSETS_H_
#define PYSTROBE_DAEMON_PYTHON_PYTHON_OFFSETS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "bpf/pystrobe_abi.h"

namespace pystrobe {

struct PythonVersion {
  int major = 0;
  int minor = 0;
  int micro = 0;

  // "3.11.7"; "3.9" when the micro version is unknown (micro < 0).
  std::string ToString() const;
  friend bool operator==(const PythonVersion&, const PythonVersion&) = default;
};

// Builds a PythonVersion from a PY_VERSION_HEX value (0x030B07F0 is 3.11.7).
PythonVersion PythonVersionFromHex(uint64_t hex);

// Everything pystrobe needs to read one interpreter version's memory. The
// kernel gets all of it: it walks frames, and copies the code objects (str
// objects included) of short-lived processes.
struct PythonLayout {
  pystrobe_python_offsets abi = {};
  // PyInterpreterState's sys.modules (imports.modules), from _Py_DebugOffsets
  // (3.13+) for userspace readers only; PYSTROBE_PY_OFFSET_NONE otherwise.
  uint32_t interp_modules = PYSTROBE_PY_OFFSET_NONE;
};

// True for the versions pystrobe has verified tables for (2.7, 3.6 to 3.15).
bool IsSupportedPythonVersion(const PythonVersion& version);

// The versions IsSupportedPythonVersion accepts, for messages.
inline constexpr char kSupportedPythonVersions[] =
    "2.7 and 3.6 to 3.15, and free-threaded 3.13t to 3.15t";

// True for versions whose roots are file-scope globals, not _PyRuntime (2.7, 3.6).
bool PythonVersionHasGlobalRoots(const PythonVersion& version);

// The layout of `version` from pystrobe's own tables, which
// tests/unit/python/python_offsets_test.cc checks against each version's headers.
// Unimplemented, naming the version, for versions outside kSupportedPythonVersions.
// For 2.7 and 3.6 the fields relative to the roots stay NONE until
// PlacePythonGlobals fills them.
absl::StatusOr<PythonLayout> PythonLayoutForVersion(const PythonVersion& version);

// Where 2.7's and 3.6's interpreter keeps what the walk starts from: file-scope
// globals of the binary, as addresses in the target; 0 where unknown.
struct PythonGlobals {
  uint64_t interp_head = 0;           // static PyInterpreterState *interp_head
  uint64_t thread_state_current = 0;  // _PyThreadState_Current: the GIL's holder, or NULL
  // What a thread waiting for the GIL futex-waits on: 3.6's gil_cond and
  // gil_mutex, [start, end); 2.7's interpreter_lock, a pointer to a sem_t
  // (indirect, end - start the semaphore's size).
  uint64_t gil_wait_start = 0;
  uint64_t gil_wait_end = 0;
  bool gil_wait_indirect = false;
};

// Fills `layout`'s root offsets (runtime_interpreters_head, runtime_gil and
// the gil_* fields) relative to the lowest address of `globals`, and returns
// that address: the process's runtime_addr. InvalidArgument when interp_head
// or thread_state_current is unknown, or the globals lie too far apart.
absl::StatusOr<uint64_t> PlacePythonGlobals(const PythonGlobals& globals, PythonLayout& layout);

// The cookie at the start of _PyRuntime in 3.13+ (_Py_DebugOffsets).
inline constexpr std::string_view kPythonDebugOffsetsCookie = "xdebugpy";
// Bytes of _Py_DebugOffsets as laid out by 3.13, 3.14 and 3.15.
inline constexpr size_t kPythonDebugOffsets313Size = 584;
inline constexpr size_t kPythonDebugOffsets314Size = 760;
inline constexpr size_t kPythonDebugOffsets315Size = 888;

// The bytes of _Py_DebugOffsets for `version`; Unimplemented for versions
// whose layout pystrobe does not know.
absl::StatusOr<size_t> PythonDebugOffsetsSize(const PythonVersion& version);

// The PY_VERSION_HEX stored in a _Py_DebugOffsets blob, or an error when the
// cookie is missing or the blob is too short.
absl::StatusOr<uint64_t> PythonDebugOffsetsVersion(absl::Span<const uint8_t> debug_offsets);

// The layout of a 3.13+ interpreter taken from its own _Py_DebugOffsets (the
// bytes at the start of _PyRuntime), so patch releases that move fields keep
// working, and free-threaded builds (3.14t+) are read at all. Validated: the
// cookie, a version whose layout is known, free_threaded 0 or 1, every field
// inside the structure size the blob gives for it. Fields the debug offsets
// do not carry come from the version's table (or the free-threaded build's
// constants).
absl::StatusOr<PythonLayout> PythonLayoutFromDebugOffsets(absl::Span<const uint8_t> debug_offsets);

// (name, value) of every offset in `layout`, with the names printed by
// tests/workloads/python/print_offsets.c; absent fields are PYSTROBE_PY_OFFSET_NONE.
std::vector<std::pair<std::string_view, uint64_t>> PythonLayoutFields(const PythonLayout& layout);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_PYTHON_OFFSETS_H_

// Finds the CPython interpreter in a running process: which binary holds it
// (a static interpreter, libpython3.X.so, or a program embedding either), its
// version, where _PyRuntime lives, and the layout to read it with.
#ifndef PYSTROBE_DAEMON_PYTHON_INTERPRETER_FINDER_H_
#define PYSTROBE_DAEMON_PYTHON_INTERPRETER_FINDER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/python/python_offsets.h"

namespace pystrobe {

struct PythonInterpreter {
  pid_t pid = 0;
  PythonVersion version;
  std::string binary_path;     // the ELF holding _PyRuntime, as /proc/PID/maps names it
  bool in_executable = false;  // binary_path is the process's executable, not a libpython
  uint64_t load_bias = 0;      // runtime address minus link-time address in binary_path
  // &_PyRuntime; on 2.7 and 3.6 the lowest of the globals the walk starts
  // from (see PlacePythonGlobals).
  uint64_t runtime_address = 0;
  uint64_t code_type_address = 0;     // &PyCode_Type
  uint64_t unicode_type_address = 0;  // &PyUnicode_Type
  uint64_t bytes_type_address = 0;    // &PyBytes_Type (&PyString_Type on 2.7)
  // True when `layout` came from the interpreter's own _Py_DebugOffsets (3.13+).
  bool layout_from_debug_offsets = false;
  PythonLayout layout;

  // What the kernel walker gets for this process.
  pystrobe_python_process ToBpf() const;
};

// One line of /proc/PID/maps.
struct MemoryMapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
  std::string perms;
  std::string path;  // empty for anonymous mappings
};

// Parses the text of /proc/PID/maps; malformed lines are skipped.
std::vector<MemoryMapping> ParseProcMaps(absl::string_view text);

// The major.minor a binary's file name promises ("libpython3.9.so.1.0",
// "python3.11", "libpython3.7m.so"): {3, 9, -1}; major 0 when there is none.
PythonVersion PythonVersionFromFileName(absl::string_view path);

// Finds CPython in process `pid`. Errors: NotFound when the process runs no
// CPython (or exited), Unavailable when its CPython cannot be read yet (the
// dynamic loader is still mapping libpython: look again), Unimplemented
// naming the version when it runs a CPython pystrobe does not support (3.5
// and older 3.x, 3.16+), PermissionDenied when its memory or files cannot be
// read.
absl::StatusOr<PythonInterpreter> FindPythonInterpreter(pid_t pid);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_INTERPRETER_FINDER_H_

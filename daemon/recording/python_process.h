// One CPython process image as the recorder sees it: its interpreter, a
// reader of its code objects, and where the interpreter's own code lives
// (to tell eval-loop frames from extension frames).
#ifndef PYSTROBE_DAEMON_RECORDING_PYTHON_PROCESS_H_
#define PYSTROBE_DAEMON_RECORDING_PYTHON_PROCESS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/python/code_object_reader.h"
#include "daemon/python/interpreter_finder.h"
#include "daemon/python/process_memory.h"

namespace pystrobe {

class PythonProcess {
 public:
  // Finds CPython in `pid` now. NotFound when it runs none (yet: libpython may
  // not be mapped so soon after exec), Unimplemented for versions we do not
  // support.
  static absl::StatusOr<std::unique_ptr<PythonProcess>> Discover(uint32_t pid);

  PythonProcess(PythonInterpreter interpreter, std::unique_ptr<ProcessMemory> memory,
                std::vector<std::pair<uint64_t, uint64_t>> interpreter_ranges, std::string cwd);

  const PythonInterpreter& interpreter() const { return interpreter_; }
  // The process's working directory at discovery, to shorten file names.
  const std::string& cwd() const { return cwd_; }

  // True when `address` is in the interpreter's binary (python or libpython).
  bool InInterpreter(uint64_t address) const;

  // The code object the kernel walker saw at `address` with `stamp`.
  absl::StatusOr<std::shared_ptr<const PythonCodeObject>> ReadCode(uint64_t address,
                                                                   uint32_t stamp) {
    return code_reader_.Read(address, stamp);
  }

  // The same, from the kernel's copy of the code object's memory; a copy
  // without the line table (too big to copy) names the object without lines.
  absl::StatusOr<std::shared_ptr<const PythonCodeObject>> ReadCodeFrom(const ProcessMemory& copy,
                                                                       uint64_t address,
                                                                       uint32_t stamp) const {
    return CodeObjectReader(copy, interpreter_, CodeObjectReader::LineTables::kOptional)
        .Read(address, stamp);
  }

 private:
  PythonInterpreter interpreter_;
  std::unique_ptr<ProcessMemory> memory_;
  CodeObjectReader code_reader_;
  std::vector<std::pair<uint64_t, uint64_t>> interpreter_ranges_;  // [start, end)
  std::string cwd_;
};

// How a Python frame's file is shown: the part after site-packages/ or
// dist-packages/, else after lib/pythonX.Y/, else relative to `cwd` when
// under it, else the base name.
std::string ShortenPythonFilename(absl::string_view path, absl::string_view cwd);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_PYTHON_PROCESS_H_

// Reads CPython code objects out of a running process, validating all it
// reads, and caches them by (address, stamp).
#ifndef PYSTROBE_DAEMON_PYTHON_CODE_OBJECT_READER_H_
#define PYSTROBE_DAEMON_PYTHON_CODE_OBJECT_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "daemon/python/interpreter_finder.h"
#include "daemon/python/line_table.h"
#include "daemon/python/process_memory.h"

namespace pystrobe {

struct PythonCodeObject {
  uint64_t address = 0;
  uint32_t stamp = 0;    // pystrobe_python_code_stamp32 of this object, as samples carry it
  std::string name;      // co_qualname (3.11+), else co_name; UTF-8
  std::string filename;  // co_filename, UTF-8
  int32_t first_line = 0;
  std::vector<uint8_t> line_table_bytes;  // co_lnotab / co_linetable as read
  LineTable line_table;
  uint32_t code_bytes = 0;  // length of the bytecode in bytes
};

// One symbolized Python frame.
struct PythonFrameSymbol {
  std::string name;
  std::string filename;
  int32_t line = -1;  // -1 when the instruction has no line
};

// Reads the str object at `address` as UTF-8: a compact str of at most
// `max_chars` characters, or an error naming `what` (not a str, bad state,
// invalid character).
absl::StatusOr<std::string> ReadPythonStr(const ProcessMemory& memory,
                                          const PythonInterpreter& interpreter, uint64_t address,
                                          std::string_view what, size_t max_chars);

// Where the bytecode that a 3.11+ frame's instruction pointer points into
// begins: the code object's own co_code_adaptive or, on a free-threaded
// 3.14+ build, the copy its thread runs (`tlbc_index` > 0; see step 4 in
// bpf/pystrobe_abi.h).
absl::StatusOr<uint64_t> FrameBytecodeStart(const ProcessMemory& memory,
                                            const pystrobe_python_offsets& o, uint64_t code,
                                            int32_t tlbc_index);

class CodeObjectReader {
 public:
  static constexpr size_t kMaxNameBytes = 4096;  // per str, in characters
  static constexpr size_t kMaxLineTableBytes = 1 << 20;
  static constexpr size_t kMaxCachedObjects = 1 << 16;

  // Whether a line table that `memory` does not hold (OutOfRange) fails
  // the read, or leaves the object without lines: the kernel's copies
  // leave out tables too big to copy, and a name without a line beats none.
  enum class LineTables { kRequired, kOptional };

  // `memory` and `interpreter` must outlive the reader.
  CodeObjectReader(const ProcessMemory& memory, const PythonInterpreter& interpreter,
                   LineTables line_tables = LineTables::kRequired)
      : memory_(memory), interpreter_(interpreter), line_tables_(line_tables) {}

  // The code object at `address` as the walker saw it, identified by `stamp`.
  // A cached object with the same stamp is returned without reading; a
  // different stamp means the address was reused: the entry is replaced and,
  // if the object now there does not match `stamp` either, FailedPrecondition.
  // Garbage (a non-code object, a bad string) is an error, never a name.
  absl::StatusOr<std::shared_ptr<const PythonCodeObject>> Read(uint64_t address, uint32_t stamp);

  // The stamp of the code object at `address` now, from one small read of
  // its head (then Read(address, stamp) is served from the cache).
  absl::StatusOr<uint32_t> CurrentStamp(uint64_t address) const;

  // Reads whatever code object is at `address` now, bypassing the cache check.
  absl::StatusOr<std::shared_ptr<const PythonCodeObject>> ReadCurrent(uint64_t address);

  // Name, file and line of a frame: `instr_offset` is the byte offset the
  // walker sends (see bpf/pystrobe_abi.h).
  absl::StatusOr<PythonFrameSymbol> Symbolize(uint64_t address, uint32_t stamp,
                                              int32_t instr_offset);

  size_t cached_objects() const { return cache_.size(); }

 private:
  static constexpr size_t kMaxCodeHeader = 256;

  // Reads the head of the code object at `address` (the fields up to its
  // name, file name and first line) and checks that it is a code object.
  absl::Status ReadHeader(uint64_t address, uint8_t (&header)[kMaxCodeHeader]) const;
  absl::StatusOr<std::shared_ptr<const PythonCodeObject>> ReadFromMemory(uint64_t address) const;
  absl::StatusOr<std::string> ReadString(uint64_t address, std::string_view what) const;
  absl::StatusOr<std::vector<uint8_t>> ReadBytes(uint64_t address, size_t max_size,
                                                 std::string_view what) const;

  const ProcessMemory& memory_;
  const PythonInterpreter& interpreter_;
  LineTables line_tables_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const PythonCodeObject>> cache_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_CODE_OBJECT_READER_H_

#ifndef PYSTROBE_DAEMON_SYMBOLIZER_MODULE_SYMBOLS_H_
#define PYSTROBE_DAEMON_SYMBOLIZER_MODULE_SYMBOLS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/elf/elf_file.h"
#include "daemon/symbolizer/native_symbolizer.h"

namespace pystrobe {

// Calls `visit` with every function symbol (STT_FUNC or STT_GNU_IFUNC, with
// an address and a name, size 0 included) of the separate debug file of
// `file`, if there is one, then of `file` itself: what ModuleSymbols keeps,
// names as the file has them (mangled), before any deduplication. Fails
// when `file`'s own symbol tables cannot be read; a debug file that cannot
// be is passed over.
absl::Status ForEachFunctionSymbol(
    const ElfFile& file,
    absl::FunctionRef<void(absl::string_view name, uint64_t start, uint64_t size)> visit);

// The function symbols of one ELF file (an executable, a shared library or
// the vDSO), read whole at load and immutable after, so one instance can be
// shared by every process that maps the file.
//
// Symbols come from .symtab and .dynsym of the file and of its separate debug
// file (found by build id under /usr/lib/debug/.build-id, or through
// .gnu_debuglink next to the file or under /usr/lib/debug), read by
// daemon/elf (ForEachFunctionSymbol below). C++ names are demangled once,
// here. Storage is one sorted array of 24-byte entries and one pool of
// NUL-terminated names.
//
// The file's GNU build id and executable segments are read with the symbols,
// once per file, for profiles that say which file a frame's code came from.
class ModuleSymbols {
 public:
  // Reads the ELF file at path (e.g. /proc/PID/root/usr/lib/libc.so.6).
  // Fails when the file cannot be opened or is not ELF.
  static absl::StatusOr<std::shared_ptr<const ModuleSymbols>> Load(const std::string& path);

  // The vDSO of this kernel, read from pystrobe's own mapping (every 64-bit
  // process maps the same image).
  static std::shared_ptr<const ModuleSymbols> LoadVdso();

  // The function covering the byte at file_offset in the file; nullopt when
  // no executable segment holds that offset or no symbol covers it. The view
  // lives as long as this object.
  std::optional<absl::string_view> FunctionAt(uint64_t file_offset) const;

  // GNU build id in hex ("readelf -n"); empty when the file has none.
  const std::string& build_id() const { return build_id_; }
  // Executable PT_LOAD segments: file offsets to ELF virtual addresses.
  const std::vector<CodeSegment>& code_segments() const { return segments_; }

  // Heap bytes held (entries, names, segments, build id).
  size_t MemoryBytes() const;
  size_t symbol_count() const { return symbols_.size(); }

  // Public for make_shared; use Load or LoadVdso.
  using Segment = CodeSegment;
  struct Symbol {
    uint64_t start;  // ELF virtual address.
    // Largest end (start + size) of this and every earlier entry: a lookup
    // walks back over nested symbols only while one can still cover it.
    uint64_t reach;
    uint32_t size;
    uint32_t name;  // Offset in names_.
  };
  ModuleSymbols(std::vector<Segment> segments, std::vector<Symbol> symbols, std::string names,
                std::string build_id)
      : segments_(std::move(segments)),
        symbols_(std::move(symbols)),
        names_(std::move(names)),
        build_id_(std::move(build_id)) {}

 private:
  std::vector<Segment> segments_;  // Executable PT_LOAD segments.
  std::vector<Symbol> symbols_;    // Sorted by start; one entry per start.
  std::string names_;
  std::string build_id_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SYMBOLIZER_MODULE_SYMBOLS_H_

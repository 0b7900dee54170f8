#ifndef PYSTROBE_DAEMON_SYMBOLIZER_NATIVE_SYMBOLIZER_H_
#define PYSTROBE_DAEMON_SYMBOLIZER_NATIVE_SYMBOLIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pystrobe {

// An executable PT_LOAD segment of an ELF file: the bytes at file offsets
// [file_offset, file_offset + size) run at ELF virtual addresses from vaddr.
struct CodeSegment {
  uint64_t vaddr = 0;
  uint64_t size = 0;
  uint64_t file_offset = 0;

  bool operator==(const CodeSegment&) const = default;
};

// Where a native address lies: the file mapped there and the offset in it,
// what a profile reader with the same file needs to symbolize it again. The
// views stay valid until the next call on the ProcessSymbols that made them.
struct NativeCodeLocation {
  // As the process named it (its mount namespace), e.g.
  // "/usr/lib/x86_64-linux-gnu/libc.so.6"; or "[vdso]".
  absl::string_view path;
  // GNU build id in hex; empty when the file has none or was not read.
  absl::string_view build_id;
  // The file's executable segments; empty when it was not read.
  absl::Span<const CodeSegment> code_segments;
  uint64_t file_offset = 0;
};

// A native frame named, and where its code lies (nullopt when no mapping
// holds the address).
struct NativeFrameSymbol {
  std::string name;
  std::optional<NativeCodeLocation> location;
};

// Names native frames of one process image (between two execs). Created when
// the first sample of the image arrives, while the process still runs, so that
// addresses resolve even after the process has exited.
//
// Implementations need not be thread-safe: use one instance from one thread at
// a time (the aggregator that symbolizes owns them).
class ProcessSymbols {
 public:
  virtual ~ProcessSymbols() = default;

  // "function" (C++ names demangled), or "module+0xoffset" (module = file
  // basename, offset in the file) when no symbol covers addr, or "[unknown]"
  // when no mapping does.
  virtual std::string Symbolize(uint64_t addr) = 0;

  // The name Symbolize gives, with the location of the code. Implementations
  // that do not know locations (BCC's reference in the tests, fakes) give the
  // name alone.
  virtual NativeFrameSymbol Resolve(uint64_t addr) { return {Symbolize(addr), std::nullopt}; }
};

// Makes ProcessSymbols; an interface so that code that consumes native names
// can be tested with a fake, without processes.
class NativeSymbolizer {
 public:
  virtual ~NativeSymbolizer() = default;

  // Snapshot what is needed to symbolize pid's current image now. NotFound
  // when the process is gone.
  virtual absl::StatusOr<std::unique_ptr<ProcessSymbols>> ForProcess(uint32_t pid) = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SYMBOLIZER_NATIVE_SYMBOLIZER_H_

#ifndef PYSTROBE_DAEMON_SYMBOLIZER_NATIVE_SYMBOLIZER_H_
#define PYSTROBE_DAEMON_SYMBOLIZER_NATIVE_SYMBOLIZER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace pystrobe {

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
};

// Makes ProcessSymbols; an interface so that code that consumes native names
// can be tested with a fake, without processes or BCC.
class NativeSymbolizer {
 public:
  virtual ~NativeSymbolizer() = default;

  // Snapshot what is needed to symbolize pid's current image now. NotFound
  // when the process is gone.
  virtual absl::StatusOr<std::unique_ptr<ProcessSymbols>> ForProcess(uint32_t pid) = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SYMBOLIZER_NATIVE_SYMBOLIZER_H_

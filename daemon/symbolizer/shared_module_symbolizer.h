#ifndef PYSTROBE_DAEMON_SYMBOLIZER_SHARED_MODULE_SYMBOLIZER_H_
#define PYSTROBE_DAEMON_SYMBOLIZER_SHARED_MODULE_SYMBOLIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/symbolizer/module_symbol_cache.h"
#include "daemon/symbolizer/native_symbolizer.h"

namespace pystrobe {

// The NativeSymbolizer pystrobe uses (record, stat, top, the daemon).
//
// ForProcess reads /proc/PID/maps and takes shared references to the symbol
// tables of the mapped files from a ModuleSymbolCache, which reads each file
// (dev, inode) once for all processes. A table is read whole when first
// needed, while the process runs, so names resolve after it exits; after
// that, a new process of a known binary costs only its maps: ~0.1 ms for
// python3.11, where BCC's symbolizer (kept as the tests' reference,
// tests/unit/symbolizer/bcc_native_symbolizer.h) rebuilds every table per
// process (~4 ms, and ~2.5 MB per live process).
//
// Addresses become file offsets through the mapping, and ELF virtual
// addresses through the executable PT_LOAD segment holding that offset, which
// covers PIE and non-PIE executables and shared libraries alike. vDSO frames
// are named from pystrobe's own vDSO (same kernel, same image). Resolve also
// gives the mapped path, the file offset, and the file's build id and
// segments, which are read with its symbols: once per file.
//
// It does not read /tmp/perf-PID.map (JIT maps: the recording layer does) or
// MiniDebugInfo (.gnu_debugdata), which BCC's reader as Debian builds it
// did not read either.
//
// Thread safety: the symbolizer and its cache may be used from several
// threads; each ProcessSymbols from one thread at a time.
class SharedModuleSymbolizer final : public NativeSymbolizer {
 public:
  struct Options {
    // Bound on cached tables that no ProcessSymbols holds (see
    // ModuleSymbolCache).
    size_t max_cache_bytes = size_t{64} << 20;
    // A lookup outside every known mapping (a library dlopen'ed after the
    // snapshot) re-reads the process's maps at most this often.
    absl::Duration min_refresh_interval = absl::Seconds(1);
  };

  SharedModuleSymbolizer() : SharedModuleSymbolizer(Options()) {}
  explicit SharedModuleSymbolizer(Options options);

  absl::StatusOr<std::unique_ptr<ProcessSymbols>> ForProcess(uint32_t pid) override;

  ModuleSymbolCache::Stats cache_stats() const { return cache_->stats(); }

 private:
  Options options_;
  // Shared with the ProcessSymbols, which refresh through it and may outlive
  // the symbolizer.
  std::shared_ptr<ModuleSymbolCache> cache_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SYMBOLIZER_SHARED_MODULE_SYMBOLIZER_H_

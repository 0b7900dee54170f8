// BCC's symbolizer behind the NativeSymbolizer interface: a test-time
// reference only, that native_symbolizer_test.cc holds the product's
// SharedModuleSymbolizer to (same names, same promises). Not shipped.
#ifndef PYSTROBE_TESTS_UNIT_SYMBOLIZER_BCC_NATIVE_SYMBOLIZER_H_
#define PYSTROBE_TESTS_UNIT_SYMBOLIZER_BCC_NATIVE_SYMBOLIZER_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/symbolizer/native_symbolizer.h"

namespace pystrobe {

// NativeSymbolizer on top of BCC's symbol cache (bcc_syms.h), which reads ELF
// .symtab/.dynsym, separate debug files (build id, .gnu_debuglink,
// .gnu_debugdata), /tmp/perf-PID.map and the vDSO, and opens binaries through
// /proc/PID/root so that processes in other mount namespaces resolve.
//
// BCC keeps each module's file open from the snapshot on, so symbol tables can
// still be read after the process is gone; by default ForProcess also loads
// every table while the process runs, because BCC looks debug files up by the
// binary's path (.gnu_debuglink next to it), which no longer exists after exit.
// Files deleted while mapped (package upgrades), which BCC cannot open by
// path, are read through /proc/PID/map_files in ForProcess (needs root).
// Measured on a warm page cache: ForProcess costs ~1.5 ms for a small C
// program, ~4 ms for Debian's python3.11 and 6-20 ms for a python3.11 with
// full symbol tables and 31 modules; lookups then cost ~5 us.
//
// Not thread-safe, and neither are the ProcessSymbols it makes: use each from
// one thread at a time. BCC's caches are per instance, so separate instances
// may be used from separate threads.
class BccNativeSymbolizer final : public NativeSymbolizer {
 public:
  struct Options {
    // Load all symbol tables in ForProcess. Off: BCC loads a module's table
    // at its first lookup, which is cheaper for processes that are sampled
    // little, but loses names found through .gnu_debuglink once the process
    // has exited.
    bool load_eagerly = true;
    // BCC's lazy_symbolize: keep string-table indexes and read a name from
    // the file at its first lookup. Saves memory, but reopens the ELF file
    // and its debug file for every new name (0.1-1 ms each), and cannot find
    // a .gnu_debuglink debug file again once the process has exited.
    bool lazy_names = false;
    // A lookup outside every known mapping (a library dlopen'ed after the
    // snapshot) re-reads the process's maps at most this often.
    absl::Duration min_refresh_interval = absl::Seconds(1);
  };

  BccNativeSymbolizer() : BccNativeSymbolizer(Options()) {}
  explicit BccNativeSymbolizer(Options options) : options_(options) {}

  absl::StatusOr<std::unique_ptr<ProcessSymbols>> ForProcess(uint32_t pid) override;

 private:
  Options options_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_TESTS_UNIT_SYMBOLIZER_BCC_NATIVE_SYMBOLIZER_H_

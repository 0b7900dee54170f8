#ifndef PYSTROBE_DAEMON_SYMBOLIZER_KERNEL_SYMBOLIZER_H_
#define PYSTROBE_DAEMON_SYMBOLIZER_KERNEL_SYMBOLIZER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/procfs/paths.h"

namespace pystrobe {

// One kernel function that covers an address.
struct KernelSymbol {
  std::string_view name;
  std::string_view module;  // Empty for the core kernel image.
  uint64_t offset = 0;      // From the start of the function.
};

// Names kernel stack frames from a snapshot of /proc/kallsyms.
//
// kallsyms gives start addresses but no sizes, so a function is taken to end
// where the next symbol starts. Markers that end a text region (_etext,
// _einittext) and data symbols, when the kernel lists them, end the function
// before them, so addresses past the text are reported unknown rather than
// blamed on the last function. The end of a module's last function is not
// knowable from kallsyms alone.
//
// Immutable after construction, so concurrent Symbolize/Lookup calls are safe.
// Module load/unload and BPF programs loaded later are not seen: build a new
// snapshot to pick them up.
class KernelSymbolizer {
 public:
  // Reads and parses `path` (normally /proc/kallsyms), a buffer at a time. Fails when the file is
  // unreadable, and with PermissionDenied when the kernel hides addresses
  // (kptr_restrict, or not root), because every frame would then be unknown.
  static absl::StatusOr<KernelSymbolizer> FromFile(
      const std::string& path = procfs::Path("kallsyms"));

  // Parses kallsyms text, e.g. a test fixture. Malformed lines are skipped and
  // counted in malformed_lines(); only "all addresses hidden" is an error.
  static absl::StatusOr<KernelSymbolizer> FromText(std::string_view text);

  KernelSymbolizer(KernelSymbolizer&&) = default;
  KernelSymbolizer& operator=(KernelSymbolizer&&) = default;

  // The function covering `addr`, or nullopt outside every known function.
  // The views stay valid as long as this symbolizer.
  std::optional<KernelSymbol> Lookup(uint64_t addr) const;

  // A flame graph frame: "name_[k]", or "[unknown]_[k]" (flamegraph.pl's
  // convention, so that kernel frames are coloured as such).
  std::string Symbolize(uint64_t addr) const;

  // Function symbols kept (aliases at one address count once).
  size_t function_count() const { return function_count_; }
  // Lines that could not be parsed and were skipped.
  size_t malformed_lines() const { return malformed_lines_; }

 private:
  // A point in the kernel's address space where a function starts, or where
  // text stops (a boundary: no name). Names and modules live in
  // name_pool_/modules_ so that ~200k entries do not each own a heap string,
  // and an entry is 16 bytes: every page a start-up first touches costs a
  // fault, tens of microseconds on some VMs.
  struct Entry {
    uint64_t addr;
    uint32_t name_offset;   // Into name_pool_; its order is the order listed.
    uint16_t name_size;     // 0 for a boundary (kallsyms names are < 512 bytes).
    uint16_t module_index;  // Index into modules_; 0 is the core kernel ("").
    bool is_function() const { return name_size > 0; }
  };

  KernelSymbolizer() { modules_.emplace_back(); }  // Module 0: the core kernel.

  // Parsing: lines are added one at a time (a file is read a buffer at a
  // time; blank lines are skipped), then Finish sorts them and says whether
  // they make a symbolizer.
  void AddLine(absl::string_view line);
  absl::Status Finish();

  std::vector<Entry> entries_;  // Sorted by address, one per address.
  std::string name_pool_;
  std::vector<std::string> modules_;
  size_t function_count_ = 0;
  size_t malformed_lines_ = 0;
  size_t parsed_lines_ = 0;
  bool any_nonzero_address_ = false;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SYMBOLIZER_KERNEL_SYMBOLIZER_H_

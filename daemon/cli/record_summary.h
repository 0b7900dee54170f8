// What `record` prints to stderr when it ends: samples, every kernel drop by
// its words in kDropReasons, and the userspace counts beside them; and the
// same counts as JSON (--summary-json), which is what scripts should read.
#ifndef PYSTROBE_DAEMON_CLI_RECORD_SUMMARY_H_
#define PYSTROBE_DAEMON_CLI_RECORD_SUMMARY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/recording/recorder.h"

namespace pystrobe {

// The recorder's side of the summary.
struct RecordTotals {
  uint64_t samples = 0;
  size_t processes = 0;
  size_t python_processes = 0;
  // Processes whose CPython was seen but not read (ProcessTable::python_not_read):
  // how many, and the first few, with why.
  size_t python_not_read = 0;
  std::vector<ProcessTable::PythonNotRead> python_not_read_examples = {};
  uint64_t malformed_records = 0;
  size_t python_codes_unreadable = 0;
  size_t python_codes_from_copies = 0;
  uint64_t python_code_copy_bytes = 0;  // ring buffer bytes of the kernel's copies
  uint64_t samples_without_gil = 0;
  uint64_t samples_free_threaded = 0;  // kept by --gil: their CPython has no GIL
  uint64_t memory_bytes = 0;           // resident growth the memory samples stand for
  uint64_t allocation_bytes = 0;       // allocated, as the sampled allocations stand for
  // ... of which held, by the moment each process's view was taken.
  Recorder::InUseTotals in_use = {};
};

// Native unwinding with tables (--native): the binaries the targets map,
// the tables their walks needed (built, or read back from disk), the kernel
// memory they take against its budget, and the CPU spent on them.
struct NativeUnwindTotals {
  bool enabled = false;
  uint64_t binaries = 0;            // distinct binaries with call frame information mapped
  uint64_t tables_shared = 0;       // mappings answered by a binary already known
  uint64_t tables_built = 0;        // from call frame information
  uint64_t tables_from_disk = 0;    // read back from the disk cache
  uint64_t tables_loaded = 0;       // put in the kernel (again after an eviction too)
  uint64_t tables_evicted = 0;      // taken out for room, least recently walked first
  uint64_t tables_unavailable = 0;  // never fit, or failed to build
  // Distinct files mapped executable without call frame information (or
  // unreadable): their frames end a stack in [unknown].
  uint64_t files_without_cfi = 0;
  uint64_t kernel_bytes = 0;  // at most, during the recording
  uint64_t budget_bytes = 0;
  absl::Duration build_cpu;      // building tables from binaries
  absl::Duration disk_load_cpu;  // reading them back from disk
  bool disk_cache = false;
};

// The summary's lines, each ending in a newline.
std::string RecordSummary(const SamplerCounters& kernel, const RecordTotals& totals,
                          absl::Duration elapsed, int rate_hz,
                          const NativeUnwindTotals& native = {});
// The same counts as one JSON object (and a newline), for scripts and tests:
// drops are keyed by their metric label (pystrobe_dropped_total{reason}).
std::string RecordSummaryJson(const SamplerCounters& kernel, const RecordTotals& totals,
                              absl::Duration elapsed, int rate_hz,
                              const NativeUnwindTotals& native = {});

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_RECORD_SUMMARY_H_

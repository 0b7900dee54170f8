// The daemon's own health as Prometheus families: samples, every drop by
// reason, map fill, cache sizes, windows written, the control socket's
// requests and connections, its CPU time and memory.
#ifndef PYSTROBE_DAEMON_SERVICE_SELF_METRICS_H_
#define PYSTROBE_DAEMON_SERVICE_SELF_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/accounting/process_counters.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/service/control_server.h"
#include "exporters/push_queue.h"
#include "prometheus/metric_family.h"

namespace pystrobe {

// This process's CPU time and resident memory, from /proc/self.
struct SelfUsage {
  double cpu_user_seconds = 0;
  double cpu_system_seconds = 0;
  uint64_t resident_bytes = 0;
};
SelfUsage ReadSelfUsage();

// Windows pushed to a profile store (exporters.push, exporters.otlp), totals
// since start.
struct PushHealth {
  uint64_t enqueued = 0;
  uint64_t sent = 0;
  uint64_t retried = 0;
  uint64_t dropped_queue_full = 0;
  uint64_t dropped_shutdown = 0;
  uint64_t rejected = 0;
  uint64_t failed = 0;
  uint64_t queued = 0;  // waiting now, including one being sent
  uint64_t bytes_sent = 0;
  uint64_t rejected_items = 0;  // profiles refused in a partial success (OTLP)
  // Failed attempts by PushErrorReason (exporters/push_queue.h).
  std::array<uint64_t, kPushErrorReasons> errors{};
};

// Everything the daemon counts about itself; counters are totals since start.
struct DaemonHealth {
  SamplerCounters sampler;
  AccountingDrops accounting;
  std::vector<BpfSampler::MapFill> maps;
  uint64_t malformed_records = 0;
  uint64_t samples_over_stack_limit = 0;
  uint64_t samples_of_refused_processes = 0;  // limits.tracked_processes
  uint64_t native_name_evictions = 0;
  uint64_t python_code_evictions = 0;
  uint64_t images_evicted = 0;
  uint64_t python_code_read_errors = 0;
  uint64_t python_codes_from_copies = 0;    // named from the kernel's copies
  uint64_t python_code_copies_dropped = 0;  // copies userspace had no room for
  uint64_t memory_pressure_cuts = 0;        // windows cut early to stay within limits.memory
  size_t native_names = 0;
  size_t python_codes = 0;
  size_t process_images = 0;
  size_t live_processes = 0;
  size_t python_processes = 0;
  size_t python_not_read = 0;  // ProcessTable::python_not_read_count
  size_t window_stacks = 0;    // distinct stacks in the window being recorded
  // Native unwind tables (python.native_stacks): loaded now, the kernel
  // memory their rows and page entries take, and the time spent building.
  size_t unwind_tables = 0;
  uint64_t unwind_table_bytes = 0;
  uint64_t unwind_table_budget_bytes = 0;
  uint64_t unwind_tables_evicted = 0;
  double unwind_table_build_seconds = 0;
  uint64_t windows = 0;
  // Per sink: windows it failed to take.
  std::map<std::string, uint64_t> sink_errors;
  uint64_t profile_files_deleted_age = 0;
  uint64_t profile_files_deleted_size = 0;
  uint64_t profile_files = 0;
  uint64_t profile_dir_bytes = 0;
  PushHealth push;  // exporters.push: Pyroscope's ingest
  PushHealth otlp;  // exporters.otlp
  // The control socket (record, stat and top through the daemon); nullopt
  // when it is not served.
  std::optional<ControlServer::Stats> control;
  uint64_t config_reloads = 0;
  uint64_t config_reload_errors = 0;
  uint64_t memory_limit_bytes = 0;
  double window_seconds = 0;
  int rate_hz = 0;
  SelfUsage usage;
};

std::vector<prometheus::MetricFamily> SelfMetricFamilies(
    const DaemonHealth& health, const std::map<std::string, std::string>& static_labels);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_SELF_METRICS_H_

// Per-process Prometheus series from the accounting counters, with bounded
// cardinality: the processes busiest on CPU lately (at most max_series of
// them) get their own series, labelled pid, comm, container_id and
// pid_in_namespace (plus the static labels); everything else is summed into
// one series with pid="other". pid_in_namespace is the pid inside the
// process's own PID namespace (a container's), empty when that namespace is
// the daemon's: one value per pid, so it adds no series.
// A process that exits keeps its series, with its final figures, for a grace
// period, then the series goes.
//
// Values are counters since the daemon began counting a process, but for the
// resident memory gauges (the kernel's RSS counters, read as the process
// runs): "other" holds the sum over the live processes without a series. A process
// that enters the top set gets its series with everything it counted so far
// (to Prometheus, a new series); while outside the top set, what it counts is
// added to "other", which therefore only grows.
#ifndef PYSTROBE_DAEMON_SERVICE_PROCESS_METRICS_H_
#define PYSTROBE_DAEMON_SERVICE_PROCESS_METRICS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "daemon/accounting/process_counters.h"
#include "prometheus/metric_family.h"

namespace pystrobe {

struct ProcessMetricsOptions {
  size_t max_series = 200;
  // How long an exited process's series stays.
  absl::Duration exited_grace = absl::Minutes(2);
  std::map<std::string, std::string> static_labels;
};

// Where a live process runs, for its labels.
struct ProcessPlacement {
  std::string cgroup_path;        // cgroup v2 path; "" when unknown
  std::string container_id;       // "" outside containers or when unknown
  uint32_t pid_in_namespace = 0;  // 0 when its PID namespace is the daemon's
};
// Reads /proc/PID/cgroup and /proc/PID/status; empty when the process is gone.
ProcessPlacement ReadProcessPlacement(uint32_t pid);

// A process the kernel's OOM killer chose, as first seen.
struct OomVictim {
  uint32_t pid = 0;
  std::string comm;
  ProcessPlacement placement;
  ResidentMemory memory;  // as the kernel read it when it chose the victim
  absl::Time seen;
};

class ProcessMetrics {
 public:
  // The placement of a live process. Called once per process, when it is
  // first seen.
  using PlacementLookup = std::function<ProcessPlacement(uint32_t pid)>;

  ProcessMetrics(ProcessMetricsOptions options, PlacementLookup placement)
      : options_(std::move(options)), placement_(std::move(placement)) {}

  // Takes the current counters of every counted process (exited ones with
  // their final figures; the caller may forget those in the kernel after
  // this) and picks the series to export.
  void Update(const std::vector<ProcessCounters>& processes, absl::Time now);

  std::vector<prometheus::MetricFamily> Families() const;

  void set_options(ProcessMetricsOptions options) { options_ = std::move(options); }
  size_t tracked() const { return processes_.size(); }
  size_t series() const;
  // Exited processes whose series were removed after the grace period.
  uint64_t expired() const { return expired_; }
  // The OOM killer's victims seen since the last call (each once).
  std::vector<OomVictim> TakeOomVictims() { return std::move(new_oom_victims_); }
  // pystrobe_oom_kills_total by (cgroup, container_id, comm): carried over to
  // the next session's metrics when a reload starts one, so the counter does
  // not go back to zero.
  using OomKills = std::map<std::tuple<std::string, std::string, std::string>, uint64_t>;
  const OomKills& oom_kills() const { return oom_kills_; }
  void AddOomKills(const OomKills& kills) {
    for (const auto& [key, count] : kills) oom_kills_[key] += count;
  }

 private:
  struct Tracked {
    uint32_t pid = 0;
    std::string comm;
    ProcessPlacement placement;
    TaskFigures figures;    // cumulative
    TaskFigures pending;    // counted since the last update
    ResidentMemory memory;  // the latest the kernel read (gauges)
    double score = 0;       // decayed CPU seconds: what "busiest lately" means
    std::optional<absl::Time> exited_at;
    bool selected = false;
    bool seen = false;        // in the latest update
    bool oom_killed = false;  // counted in oom_kills_
  };
  using Key = std::pair<uint32_t, uint64_t>;  // pid, start_ns

  ProcessMetricsOptions options_;
  PlacementLookup placement_;
  absl::flat_hash_map<Key, Tracked> processes_;
  TaskFigures other_;  // what unselected processes counted
  uint64_t expired_ = 0;
  // pystrobe_oom_kills_total by (cgroup, container_id, comm); never reset.
  OomKills oom_kills_;
  std::vector<OomVictim> new_oom_victims_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_PROCESS_METRICS_H_

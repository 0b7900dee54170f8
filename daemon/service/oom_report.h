// What the daemon writes into the profile directory when the kernel's OOM
// killer chooses a process: one JSON file per victim, oom-<time>-<pid>.json,
// with who it was, where it ran, its memory as the kernel read it at the
// choice, what each of its threads was doing when it took the kill and, with
// memory: true, the stacks that grew its memory in the window of the kill.
#ifndef PYSTROBE_DAEMON_SERVICE_OOM_REPORT_H_
#define PYSTROBE_DAEMON_SERVICE_OOM_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/accounting/stat_report.h"
#include "daemon/service/process_metrics.h"

namespace pystrobe {

// A thread of the victim as it took the SIGKILL: its frames, root first.
struct KilledThreadStack {
  uint32_t tid = 0;
  std::string name;
  std::vector<std::string> frames = {};
};

struct OomReport {
  OomVictim victim;
  std::vector<MemoryGrowthStack> growth = {};   // heaviest first; empty without memory: true
  std::vector<KilledThreadStack> threads = {};  // by tid
};

// The report's name, e.g. oom-20261124T201500Z-1234.json.
std::string OomReportFileName(const OomVictim& victim);
// One JSON object, one line.
std::string OomReportJson(const OomReport& report);
// Writes the report into `dir` (created if missing).
absl::Status WriteOomReport(const std::string& dir, const OomReport& report);

// Reports waiting for their victims' threads. Each thread sends its stack as
// it takes the kill, before the process exits, and the daemon reads the ring
// buffer before each tick: a report is due at the tick after its victim's
// exit was seen, or after kMaxWait (a thread stuck in the kernel).
class PendingOomReports {
 public:
  static constexpr absl::Duration kMaxWait = absl::Seconds(5);

  void Add(OomReport report, absl::Time now);
  // The reports due at this tick (every one with `all`: before the stacks
  // they need are let go). Then notes which victims have exited.
  std::vector<OomReport> TakeDue(absl::Time now, const absl::flat_hash_set<uint32_t>& exited,
                                 bool all = false);
  bool empty() const { return pending_.empty(); }

 private:
  struct Pending {
    OomReport report;
    absl::Time added;
    bool exited = false;
  };
  std::vector<Pending> pending_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_OOM_REPORT_H_

// What the daemon writes into the profile directory when the kernel's OOM
// killer chooses a process: one JSON file per victim, oom-<time>-<pid>.json,
// with who it was, where it ran, its memory as the kernel read it at the
// choice and, with memory: true, the stacks that grew its memory in the
// window of the kill.
#ifndef PYSTROBE_DAEMON_SERVICE_OOM_REPORT_H_
#define PYSTROBE_DAEMON_SERVICE_OOM_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/accounting/stat_report.h"
#include "daemon/service/process_metrics.h"

namespace pystrobe {

// The report's name, e.g. oom-20261124T201500Z-1234.json.
std::string OomReportFileName(const OomVictim& victim);
// One JSON object, one line; `growth`: heaviest first (may be empty).
std::string OomReportJson(const OomVictim& victim,
                          const std::vector<MemoryGrowthStack>& growth = {});
// Writes the report into `dir` (created if missing).
absl::Status WriteOomReport(const std::string& dir, const OomVictim& victim,
                            const std::vector<MemoryGrowthStack>& growth = {});

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_OOM_REPORT_H_

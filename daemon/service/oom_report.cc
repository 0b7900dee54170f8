#include "daemon/service/oom_report.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "exporters/json_string.h"

namespace pystrobe {

std::string OomReportFileName(const OomVictim& victim) {
  return absl::StrCat("oom-", absl::FormatTime("%Y%m%dT%H%M%SZ", victim.seen, absl::UTCTimeZone()),
                      "-", victim.pid, ".json");
}

std::string OomReportJson(const OomVictim& victim, const std::vector<MemoryGrowthStack>& growth) {
  const ResidentMemory& m = victim.memory;
  std::vector<std::string> stacks;
  for (const MemoryGrowthStack& stack : growth) {
    std::vector<std::string> frames;
    for (const std::string& frame : stack.frames) frames.push_back(JsonString(frame));
    stacks.push_back(absl::StrFormat("{\"stack\":[%s],\"bytes\":%d,\"share\":%.4f}",
                                     absl::StrJoin(frames, ","), stack.bytes, stack.share));
  }
  return absl::StrFormat(
      "{\"pid\":%d,\"comm\":%s,\"cgroup\":%s,\"container_id\":%s,\"time\":%s,"
      "\"rss_bytes\":%d,\"rss_anon_bytes\":%d,\"rss_file_bytes\":%d,\"rss_shmem_bytes\":%d,"
      "\"swap_bytes\":%d,\"peak_rss_bytes\":%d,\"memory_growth_stacks\":[%s]}\n",
      victim.pid, JsonString(victim.comm), JsonString(victim.placement.cgroup_path),
      JsonString(victim.placement.container_id),
      JsonString(absl::FormatTime(absl::RFC3339_sec, victim.seen, absl::UTCTimeZone())),
      m.resident_bytes(), m.anon_bytes, m.file_bytes, m.shmem_bytes, m.swap_bytes, m.peak_bytes,
      absl::StrJoin(stacks, ","));
}

absl::Status WriteOomReport(const std::string& dir, const OomVictim& victim,
                            const std::vector<MemoryGrowthStack>& growth) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  std::filesystem::path path = std::filesystem::path(dir) / OomReportFileName(victim);
  std::ofstream out(path, std::ios::trunc);
  out << OomReportJson(victim, growth);
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("write the OOM report ", path.string()));
  return absl::OkStatus();
}

}  // namespace pystrobe

#include "daemon/service/oom_report.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "exporters/json_string.h"

namespace pystrobe {
namespace {

std::string JsonFrames(const std::vector<std::string>& frames) {
  return absl::StrCat(
      "[",
      absl::StrJoin(frames, ",",
                    [](std::string* out, const std::string& f) { out->append(JsonString(f)); }),
      "]");
}

}  // namespace

std::string OomReportFileName(const OomVictim& victim) {
  return absl::StrCat("oom-", absl::FormatTime("%Y%m%dT%H%M%SZ", victim.seen, absl::UTCTimeZone()),
                      "-", victim.pid, ".json");
}

std::string OomReportJson(const OomReport& report) {
  const OomVictim& victim = report.victim;
  const ResidentMemory& m = victim.memory;
  std::vector<std::string> threads;
  for (const KilledThreadStack& thread : report.threads) {
    threads.push_back(absl::StrFormat("{\"tid\":%d,\"name\":%s,\"stack\":%s}", thread.tid,
                                      JsonString(thread.name), JsonFrames(thread.frames)));
  }
  std::vector<std::string> stacks;
  for (const MemoryGrowthStack& stack : report.growth) {
    stacks.push_back(absl::StrFormat("{\"stack\":%s,\"bytes\":%d,\"share\":%.4f}",
                                     JsonFrames(stack.frames), stack.bytes, stack.share));
  }
  return absl::StrFormat(
      "{\"pid\":%d,\"comm\":%s,\"cgroup\":%s,\"container_id\":%s,\"time\":%s,"
      "\"rss_bytes\":%d,\"rss_anon_bytes\":%d,\"rss_file_bytes\":%d,\"rss_shmem_bytes\":%d,"
      "\"swap_bytes\":%d,\"peak_rss_bytes\":%d,\"threads\":[%s],\"memory_growth_stacks\":[%s]}\n",
      victim.pid, JsonString(victim.comm), JsonString(victim.placement.cgroup_path),
      JsonString(victim.placement.container_id),
      JsonString(absl::FormatTime(absl::RFC3339_sec, victim.seen, absl::UTCTimeZone())),
      m.resident_bytes(), m.anon_bytes, m.file_bytes, m.shmem_bytes, m.swap_bytes, m.peak_bytes,
      absl::StrJoin(threads, ","), absl::StrJoin(stacks, ","));
}

absl::Status WriteOomReport(const std::string& dir, const OomReport& report) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  std::filesystem::path path = std::filesystem::path(dir) / OomReportFileName(report.victim);
  std::ofstream out(path, std::ios::trunc);
  out << OomReportJson(report);
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("write the OOM report ", path.string()));
  return absl::OkStatus();
}

void PendingOomReports::Add(OomReport report, absl::Time now) {
  pending_.push_back({std::move(report), now});
}

std::vector<OomReport> PendingOomReports::TakeDue(absl::Time now,
                                                  const absl::flat_hash_set<uint32_t>& exited,
                                                  bool all) {
  std::vector<OomReport> due;
  std::vector<Pending> waiting;
  for (Pending& pending : pending_) {
    if (all || pending.exited || now - pending.added >= kMaxWait) {
      due.push_back(std::move(pending.report));
      continue;
    }
    pending.exited = exited.contains(pending.report.victim.pid);
    waiting.push_back(std::move(pending));
  }
  pending_ = std::move(waiting);
  return due;
}

}  // namespace pystrobe

#include "daemon/service/profile_directory.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "exporters/pprof_writer.h"

namespace pystrobe {
namespace {

namespace fs = std::filesystem;

constexpr char kPrefix[] = "pystrobe-";
constexpr char kSuffix[] = ".pb.gz";
constexpr char kTemporarySuffix[] = ".pb.gz.tmp";

bool IsOurs(const std::string& name, absl::string_view suffix) {
  return absl::StartsWith(name, kPrefix) && absl::EndsWith(name, suffix);
}

struct ProfileFile {
  fs::path path;
  absl::Time modified;
  uint64_t size = 0;
};

absl::Time ToAbslTime(fs::file_time_type time) {
  auto system = std::chrono::file_clock::to_sys(time);
  return absl::FromChrono(system);
}

}  // namespace

std::string ProfileDirectory::FileName(const ProfileWindow& window) {
  return absl::StrCat(kPrefix,
                      absl::FormatTime("%Y%m%dT%H%M%SZ", window.start, absl::UTCTimeZone()),
                      absl::StrFormat("-%06d", window.sequence), kSuffix);
}

absl::Status ProfileDirectory::Open() {
  std::error_code error;
  fs::create_directories(dir_, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("create the profile directory ", dir_, ": ", error.message()));
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_, error)) {
    std::string name = entry.path().filename().string();
    if (IsOurs(name, kTemporarySuffix)) fs::remove(entry.path(), error);
  }
  return EnforceRetention();
}

std::string ProfileDirectory::MemoryFileName(const ProfileWindow& window) {
  std::string name = FileName(window);
  return absl::StrCat(name.substr(0, name.size() - std::strlen(kSuffix)), "-memory", kSuffix);
}

absl::Status ProfileDirectory::WriteProfile(const std::string& name, const Profile& profile) {
  fs::path final_path = fs::path(dir_) / name;
  fs::path temporary = final_path;
  temporary += ".tmp";
  absl::Status status = [&]() -> absl::Status {
    std::error_code error;
    fs::create_directories(dir_, error);
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", temporary.string()));
    if (absl::Status s = PprofWriter().Write(profile, out); !s.ok()) return s;
    out.close();
    if (!out) return absl::DataLossError(absl::StrCat("writing ", temporary.string(), " failed"));
    fs::rename(temporary, final_path, error);
    if (error) {
      return absl::DataLossError(absl::StrCat("rename ", temporary.string(), " to ",
                                              final_path.string(), ": ", error.message()));
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) {
    ++stats_.write_errors;
    std::error_code ignored;
    fs::remove(temporary, ignored);
    return status;
  }
  return absl::OkStatus();
}

absl::Status ProfileDirectory::Consume(const ProfileWindow& window) {
  absl::Status status = WriteProfile(FileName(window), window.profile);
  if (status.ok()) ++stats_.windows_written;
  // The resident-growth profile beside it (memory: true).
  if (window.memory) status.Update(WriteProfile(MemoryFileName(window), *window.memory));
  if (!status.ok()) return status;
  return EnforceRetention();
}

absl::Status ProfileDirectory::EnforceRetention() {
  std::error_code error;
  std::vector<ProfileFile> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_, error)) {
    std::string name = entry.path().filename().string();
    if (!IsOurs(name, kSuffix)) continue;
    std::error_code stat_error;
    uint64_t size = entry.file_size(stat_error);
    fs::file_time_type modified = entry.last_write_time(stat_error);
    if (stat_error) continue;  // deleted meanwhile
    files.push_back({entry.path(), ToAbslTime(modified), size});
  }
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("list the profile directory ", dir_, ": ", error.message()));
  }
  // Oldest first; names sort by time too, and break ties of the same second.
  std::sort(files.begin(), files.end(), [](const ProfileFile& a, const ProfileFile& b) {
    return a.modified != b.modified ? a.modified < b.modified : a.path < b.path;
  });
  uint64_t total = 0;
  for (const ProfileFile& file : files) total += file.size;
  absl::Time now = now_();
  size_t first_kept = 0;
  for (; first_kept < files.size(); ++first_kept) {
    const ProfileFile& file = files[first_kept];
    bool too_old =
        retention_.max_age > absl::ZeroDuration() && now - file.modified > retention_.max_age;
    bool too_big = retention_.max_total_size_bytes > 0 && total > retention_.max_total_size_bytes;
    if (!too_old && !too_big) break;
    std::error_code remove_error;
    fs::remove(file.path, remove_error);
    total -= file.size;
    ++(too_old ? stats_.files_deleted_age : stats_.files_deleted_size);
  }
  stats_.files = files.size() - first_kept;
  stats_.total_bytes = total;
  return absl::OkStatus();
}

}  // namespace pystrobe

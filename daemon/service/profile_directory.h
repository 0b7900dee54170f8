// The profile directory: each window as a gzipped pprof file
// ("pystrobe-20240131T120000Z-000042.pb.gz"), written to a temporary name and
// renamed, so a reader (or a daemon killed mid-write) never sees half a file;
// then the directory is brought back within its retention, by age and by
// total size, oldest first. Only files the daemon names are ever deleted.
#ifndef PYSTROBE_DAEMON_SERVICE_PROFILE_DIRECTORY_H_
#define PYSTROBE_DAEMON_SERVICE_PROFILE_DIRECTORY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "config/config.h"
#include "daemon/service/window_sink.h"

namespace pystrobe {

class ProfileDirectory : public WindowSink {
 public:
  struct Stats {
    uint64_t windows_written = 0;
    uint64_t write_errors = 0;
    uint64_t files_deleted_age = 0;
    uint64_t files_deleted_size = 0;
    uint64_t files = 0;        // profiles in the directory after the last pass
    uint64_t total_bytes = 0;  // their size
  };

  // `now` is for tests (the age of files).
  ProfileDirectory(std::string dir, RetentionConfig retention, absl::Time (*now)() = absl::Now)
      : dir_(std::move(dir)), retention_(retention), now_(now) {}

  // Creates the directory if missing and removes temporary files left by a
  // daemon that was killed while writing; then applies the retention.
  absl::Status Open();

  std::string name() const override { return "profile_dir"; }
  absl::Status Consume(const ProfileWindow& window) override;

  // Deletes profiles older than max_age, then the oldest until the total is
  // within max_total_size_bytes.
  absl::Status EnforceRetention();

  // The file name a window gets.
  static std::string FileName(const ProfileWindow& window);
  // The window's resident-growth profile: FileName with "-memory" before
  // ".pb.gz" (kept and deleted by the same retention).
  static std::string MemoryFileName(const ProfileWindow& window);

  const std::string& dir() const { return dir_; }
  void set_retention(const RetentionConfig& retention) { retention_ = retention; }
  Stats stats() const { return stats_; }

 private:
  // Writes `profile` as pprof to `name` in the directory, through a
  // temporary file renamed into place.
  absl::Status WriteProfile(const std::string& name, const Profile& profile);

  std::string dir_;
  RetentionConfig retention_;
  absl::Time (*now_)();
  Stats stats_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_PROFILE_DIRECTORY_H_

#include "daemon/python/pthread_tid.h"

#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/procfs/process_files.h"

namespace pystrobe {
namespace {

constexpr uint32_t kWindowSize = kPthreadTidWindowEnd - kPthreadTidWindowBegin;

int32_t TidAt(const std::vector<uint8_t>& window, uint32_t offset) {
  int32_t value;
  std::memcpy(&value, window.data() + (offset - kPthreadTidWindowBegin), sizeof(value));
  return value;
}

}  // namespace

absl::StatusOr<uint32_t> FindPthreadTidOffset(const ProcessMemory& memory, pid_t pid,
                                              const std::vector<uint64_t>& pthread_ids,
                                              const absl::flat_hash_set<pid_t>& task_tids) {
  // The window of every thread whose struct can be read; a thread that exits
  // meanwhile takes its struct with it and is left out.
  absl::flat_hash_map<uint64_t, std::vector<uint8_t>> windows;
  absl::Status last_error = absl::OkStatus();
  for (uint64_t id : pthread_ids) {
    if (id == 0 || windows.contains(id)) continue;
    std::vector<uint8_t> window(kWindowSize);
    absl::Status status = memory.Read(id + kPthreadTidWindowBegin, window.data(), window.size());
    if (status.ok()) {
      windows.emplace(id, std::move(window));
    } else {
      if (status.code() == absl::StatusCode::kNotFound ||
          status.code() == absl::StatusCode::kPermissionDenied) {
        return status;  // the process is gone, or unreadable: no thread will do
      }
      last_error = status;
    }
  }
  if (windows.empty()) {
    if (!last_error.ok()) return last_error;
    return absl::NotFoundError("no thread has a pthread_t to map");
  }
  for (uint32_t offset = kPthreadTidWindowBegin; offset < kPthreadTidWindowEnd;
       offset += sizeof(int32_t)) {
    bool main_found = false;
    bool fits = true;
    absl::flat_hash_set<int32_t> seen;
    for (const auto& [id, window] : windows) {
      const int32_t tid = TidAt(window, offset);
      if (tid == 0) continue;  // an exited thread: the kernel cleared its tid
      if (!task_tids.contains(tid) || !seen.insert(tid).second) {
        fits = false;
        break;
      }
      main_found |= tid == pid;
    }
    if (fits && main_found) return offset;
  }
  return absl::NotFoundError(
      absl::StrCat("no offset in struct pthread [0x", absl::Hex(kPthreadTidWindowBegin), ", 0x",
                   absl::Hex(kPthreadTidWindowEnd), ") holds the main thread's tid (", pid,
                   ") and a distinct tid of every other thread"));
}

absl::flat_hash_set<pid_t> ReadTaskTids(pid_t pid) {
  std::vector<int32_t> tids = procfs::ReadTaskIds(pid);
  return absl::flat_hash_set<pid_t>(tids.begin(), tids.end());
}

}  // namespace pystrobe

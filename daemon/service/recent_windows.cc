#include "daemon/service/recent_windows.h"

#include <utility>

namespace pystrobe {

absl::Status RecentWindows::Consume(const ProfileWindow& window) {
  if (capacity_ == 0) return absl::OkStatus();
  // Copied outside the lock: readers render pages meanwhile.
  auto kept = std::make_shared<const ProfileWindow>(window);
  absl::MutexLock lock(&mu_);
  windows_.push_back(std::move(kept));
  while (windows_.size() > capacity_) windows_.pop_front();
  return absl::OkStatus();
}

std::vector<std::shared_ptr<const ProfileWindow>> RecentWindows::Windows() const {
  absl::MutexLock lock(&mu_);
  return {windows_.rbegin(), windows_.rend()};
}

std::shared_ptr<const ProfileWindow> RecentWindows::Find(uint64_t sequence) const {
  absl::MutexLock lock(&mu_);
  for (const auto& window : windows_) {
    if (window->sequence == sequence) return window;
  }
  return nullptr;
}

}  // namespace pystrobe

#include "daemon/unwind/unwind_table_builder.h"

#include <time.h>

#include <utility>

namespace pystrobe {
namespace {

// This thread's CPU time: what a table costs, whatever else the machine runs.
absl::Duration ThreadCpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

}  // namespace

UnwindTableBuilder::UnwindTableBuilder(UnwindTableOptions options,
                                       std::optional<UnwindTableDiskCache> disk)
    : options_(std::move(options)), disk_(std::move(disk)), thread_([this] { Run(); }) {}

UnwindTableBuilder::~UnwindTableBuilder() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  thread_.join();
}

void UnwindTableBuilder::Enqueue(Request request) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(request));
  }
  wake_.notify_one();
}

std::vector<UnwindTableBuilder::Result> UnwindTableBuilder::TakeFinished() {
  if (!has_finished_.load(std::memory_order_acquire)) return {};
  std::lock_guard<std::mutex> lock(mutex_);
  has_finished_.store(false, std::memory_order_relaxed);
  return std::exchange(finished_, {});
}

bool UnwindTableBuilder::WaitIdle(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [this] { return queue_.empty() && !busy_; });
}

UnwindTableBuilder::Stats UnwindTableBuilder::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void UnwindTableBuilder::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Request request = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();

    Result result;
    result.id = request.id;
    result.key = request.key;
    absl::Duration started = ThreadCpu();
    std::optional<UnwindTable> cached;
    if (disk_ && !request.key.empty()) cached = disk_->Load(request.key);
    if (cached) {
      result.from_disk = true;
      result.table = std::make_shared<const UnwindTable>(std::move(*cached));
    } else {
      absl::StatusOr<UnwindTable> built = BuildUnwindTable(request.path, options_);
      if (built.ok()) {
        if (disk_ && !request.key.empty()) disk_->Store(request.key, *built).IgnoreError();
        result.table = std::make_shared<const UnwindTable>(std::move(*built));
      } else {
        result.table = built.status();
      }
    }
    result.cpu = ThreadCpu() - started;

    lock.lock();
    if (result.from_disk) {
      ++stats_.from_disk;
      stats_.load_cpu += result.cpu;
    } else if (result.table.ok()) {
      ++stats_.built;
      stats_.build_cpu += result.cpu;
    } else {
      ++stats_.failed;
      stats_.build_cpu += result.cpu;
    }
    finished_.push_back(std::move(result));
    has_finished_.store(true, std::memory_order_release);
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace pystrobe

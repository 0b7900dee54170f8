// Finding the kernel tid in glibc's struct pthread: with fake memory, and on
// this very process (whose threads' pthread_t and tids we know).
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/python/pthread_tid.h"

namespace pystrobe {
namespace {

// Memory made of a few blocks; everything else is unmapped.
class FakeMemory : public ProcessMemory {
 public:
  void Put(uint64_t address, std::vector<uint8_t> bytes) { blocks_[address] = std::move(bytes); }
  void PutInt(uint64_t address, int32_t value) {
    for (auto& [start, bytes] : blocks_) {
      if (address >= start && address + 4 <= start + bytes.size()) {
        std::memcpy(bytes.data() + (address - start), &value, 4);
        return;
      }
    }
    FAIL() << "no block at " << address;
  }
  absl::Status Read(uint64_t address, void* out, size_t size) const override {
    for (const auto& [start, bytes] : blocks_) {
      if (address >= start && address + size <= start + bytes.size()) {
        std::memcpy(out, bytes.data() + (address - start), size);
        return absl::OkStatus();
      }
    }
    return absl::OutOfRangeError(absl::StrCat("unmapped ", address));
  }

 private:
  std::map<uint64_t, std::vector<uint8_t>> blocks_;
};

constexpr uint64_t kMain = 0x10000;
constexpr uint64_t kSecond = 0x20000;
constexpr uint64_t kThird = 0x30000;

FakeMemory ThreeThreads(uint32_t tid_offset) {
  FakeMemory memory;
  for (uint64_t base : {kMain, kSecond, kThird}) memory.Put(base, std::vector<uint8_t>(0x1000));
  memory.PutInt(kMain + tid_offset, 100);
  memory.PutInt(kSecond + tid_offset, 101);
  memory.PutInt(kThird + tid_offset, 102);
  return memory;
}

TEST(FindPthreadTidOffsetTest, FindsTheOffsetThatFitsEveryThread) {
  FakeMemory memory = ThreeThreads(0x2d0);
  // A decoy: the pid also sits earlier in the main thread's struct, but the
  // other threads do not hold tids there.
  memory.PutInt(kMain + 0x120, 100);
  memory.PutInt(kSecond + 0x120, 5);
  absl::StatusOr<uint32_t> offset =
      FindPthreadTidOffset(memory, 100, {kThird, kMain, kSecond}, {100, 101, 102, 103});
  ASSERT_TRUE(offset.ok()) << offset.status();
  EXPECT_EQ(*offset, 0x2d0u);
}

TEST(FindPthreadTidOffsetTest, TwoThreadsWithTheSameTidDoNotFit) {
  FakeMemory memory = ThreeThreads(0x2d0);
  memory.PutInt(kMain + 0x200, 100);
  memory.PutInt(kSecond + 0x200, 101);
  memory.PutInt(kThird + 0x200, 101);
  absl::StatusOr<uint32_t> offset =
      FindPthreadTidOffset(memory, 100, {kMain, kSecond, kThird}, {100, 101, 102});
  ASSERT_TRUE(offset.ok()) << offset.status();
  EXPECT_EQ(*offset, 0x2d0u);
}

TEST(FindPthreadTidOffsetTest, AnExitedThreadsClearedTidIsIgnored) {
  FakeMemory memory = ThreeThreads(0x2d0);
  memory.PutInt(kThird + 0x2d0, 0);
  absl::StatusOr<uint32_t> offset =
      FindPthreadTidOffset(memory, 100, {kMain, kSecond, kThird, 0}, {100, 101});
  ASSERT_TRUE(offset.ok()) << offset.status();
  EXPECT_EQ(*offset, 0x2d0u);
}

TEST(FindPthreadTidOffsetTest, UnreadableThreadIsLeftOut) {
  FakeMemory memory = ThreeThreads(0x2d0);
  absl::StatusOr<uint32_t> offset =
      FindPthreadTidOffset(memory, 100, {kMain, kSecond, 0x990000}, {100, 101, 102});
  ASSERT_TRUE(offset.ok()) << offset.status();
  EXPECT_EQ(*offset, 0x2d0u);
}

TEST(FindPthreadTidOffsetTest, OffsetOutsideTheWindowIsNotFound) {
  FakeMemory memory = ThreeThreads(0x900);
  absl::StatusOr<uint32_t> offset =
      FindPthreadTidOffset(memory, 100, {kMain, kSecond, kThird}, {100, 101, 102});
  EXPECT_EQ(offset.status().code(), absl::StatusCode::kNotFound) << offset.status();
}

TEST(FindPthreadTidOffsetTest, WithoutTheMainThreadNothingIsGuessed) {
  FakeMemory memory = ThreeThreads(0x2d0);
  absl::StatusOr<uint32_t> offset =
      FindPthreadTidOffset(memory, 100, {kSecond, kThird}, {100, 101, 102});
  EXPECT_EQ(offset.status().code(), absl::StatusCode::kNotFound) << offset.status();
}

TEST(FindPthreadTidOffsetTest, NoReadableThreadIsAnError) {
  FakeMemory memory;
  EXPECT_FALSE(FindPthreadTidOffset(memory, 100, {0x5000}, {100}).ok());
  EXPECT_FALSE(FindPthreadTidOffset(memory, 100, {}, {100}).ok());
}

// This process: the offset found through process_vm_readv on ourselves maps
// every thread's pthread_self() to its gettid().
TEST(FindPthreadTidOffsetTest, MapsThisProcesssThreads) {
  struct Seen {
    uint64_t pthread_id;
    pid_t tid;
  };
  std::vector<Seen> seen(4);
  std::atomic<int> ready{0};
  std::atomic<bool> done{false};
  seen[0] = {static_cast<uint64_t>(pthread_self()), static_cast<pid_t>(syscall(SYS_gettid))};
  std::vector<std::thread> threads;
  for (int i = 1; i < 4; ++i) {
    threads.emplace_back([&, i] {
      seen[i] = {static_cast<uint64_t>(pthread_self()), static_cast<pid_t>(syscall(SYS_gettid))};
      ++ready;
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  while (ready < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const pid_t pid = getpid();
  ASSERT_EQ(seen[0].tid, pid) << "gtest's main thread is not the process's main thread";
  absl::flat_hash_set<pid_t> tids = ReadTaskTids(pid);
  std::vector<uint64_t> ids;
  for (const Seen& s : seen) {
    ids.push_back(s.pthread_id);
    EXPECT_TRUE(tids.contains(s.tid));
  }
  RemoteProcessMemory memory(pid);
  absl::StatusOr<uint32_t> offset = FindPthreadTidOffset(memory, pid, ids, tids);
  EXPECT_TRUE(offset.ok()) << offset.status();
  if (offset.ok()) {
    // Checked while the threads still run: glibc clears the tid when one exits.
    for (const Seen& s : seen) {
      int32_t tid = 0;
      std::memcpy(&tid, reinterpret_cast<const uint8_t*>(s.pthread_id) + *offset, 4);
      EXPECT_EQ(tid, s.tid);
    }
  }
  done = true;
  for (std::thread& t : threads) t.join();
}

}  // namespace
}  // namespace pystrobe

// ReadHashMapEntries (daemon/loader/map_entries.h) on real kernel hash maps.
#include "daemon/loader/map_entries.h"

#include <bpf/bpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

#include "gtest/gtest.h"

namespace pystrobe {
namespace {

struct Value {
  uint64_t id;
  char name[40];
};

// A hash map of `max_entries`, or a skip where PYSTROBE_SKIP_BPF_TESTS=1 asks
// for one when the kernel will not make it.
int MakeMap(uint32_t max_entries) {
  int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "entries_test", sizeof(uint32_t), sizeof(Value),
                          max_entries, nullptr);
  return fd < 0 ? -errno : fd;
}

class MapEntriesTest : public ::testing::Test {
 protected:
  void Make(uint32_t max_entries) {
    fd_ = MakeMap(max_entries);
    if (fd_ >= 0) return;
    const char* skip = std::getenv("PYSTROBE_SKIP_BPF_TESTS");
    if (skip != nullptr && std::strcmp(skip, "1") == 0) {
      GTEST_SKIP() << "SKIPPED BPF test: no hash map (" << std::strerror(-fd_)
                   << ") (PYSTROBE_SKIP_BPF_TESTS=1)";
    }
    FAIL() << "the kernel made no hash map: " << std::strerror(-fd_)
           << "; set PYSTROBE_SKIP_BPF_TESTS=1 to skip the BPF tests instead";
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
  }

  int fd_ = -1;
};

TEST_F(MapEntriesTest, EveryEntryOfAMapOfManyBatchesIsReadOnce) {
  // 5,000 entries: twenty batches and more, buckets of one and of several.
  Make(8192);
  if (fd_ < 0) return;
  std::map<uint32_t, uint64_t> written;
  for (uint32_t i = 0; i < 5000; i++) {
    uint32_t key = i * 2654435761u;
    Value value{.id = uint64_t{i} << 20 | 7, .name = {}};
    std::snprintf(value.name, sizeof(value.name), "entry %u", i);
    ASSERT_EQ(bpf_map_update_elem(fd_, &key, &value, BPF_NOEXIST), 0) << i;
    written[key] = value.id;
  }

  absl::StatusOr<MapEntries> entries = ReadHashMapEntries(fd_, sizeof(uint32_t), sizeof(Value));
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->count, written.size());
  std::map<uint32_t, uint64_t> read;
  for (size_t i = 0; i < entries->count; i++) {
    uint32_t key;
    Value value;
    std::memcpy(&key, entries->key(i), sizeof(key));
    std::memcpy(&value, entries->value(i), sizeof(value));
    EXPECT_TRUE(read.emplace(key, value.id).second) << "key " << key << " read twice";
    EXPECT_STREQ(value.name, ("entry " + std::to_string(value.id >> 20)).c_str());
  }
  EXPECT_EQ(read, written);
}

TEST_F(MapEntriesTest, AnEmptyMapHasNoEntries) {
  Make(16);
  if (fd_ < 0) return;
  absl::StatusOr<MapEntries> entries = ReadHashMapEntries(fd_, sizeof(uint32_t), sizeof(Value));
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_EQ(entries->count, 0u);
  EXPECT_TRUE(entries->keys.empty());
}

TEST_F(MapEntriesTest, AClosedMapIsAnErrorNamingTheRead) {
  Make(16);
  if (fd_ < 0) return;
  close(fd_);
  int closed = fd_;
  fd_ = -1;
  absl::StatusOr<MapEntries> entries = ReadHashMapEntries(closed, sizeof(uint32_t), sizeof(Value));
  ASSERT_FALSE(entries.ok());
  EXPECT_NE(entries.status().message().find("read a map's entries"), std::string::npos)
      << entries.status();
}

}  // namespace
}  // namespace pystrobe

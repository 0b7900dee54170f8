// The disk cache of unwind tables: a table comes back exactly as stored, a
// corrupted or forged file is refused (and deleted) rather than trusted, and
// the directory stays within its bound.
#include "daemon/unwind/unwind_table_disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace pystrobe {
namespace {

const char kLibc[] = "/lib/x86_64-linux-gnu/libc.so.6";

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/unwind_cache_test.XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

UnwindTable SmallTable() {
  UnwindTable table;
  table.build_id = "00ff";
  table.load_segments = {{0, 0, 0x2000, 0x2000, true}};
  table.sources = {".eh_frame"};
  pystrobe_unwind_row start{}, body{}, end{};
  start.addr = 0x1000;
  body.addr = 0x1010;
  body.cfa_rule = PYSTROBE_UNWIND_CFA_RSP;
  body.cfa_offset = 16;
  body.rbp_rule = PYSTROBE_UNWIND_RBP_OFFSET;
  body.rbp_offset = -16;
  end.addr = 0x1100;
  table.rows = {start, body, end};
  IndexUnwindTablePages(table);
  return table;
}

bool SameRows(const UnwindTable& a, const UnwindTable& b) {
  if (a.rows.size() != b.rows.size()) return false;
  for (size_t i = 0; i < a.rows.size(); ++i) {
    if (std::memcmp(&a.rows[i], &b.rows[i], sizeof(a.rows[i])) != 0) return false;
  }
  return a.pages == b.pages && a.first_page == b.first_page && a.build_id == b.build_id &&
         a.load_segments == b.load_segments;
}

TEST(UnwindTableDiskCacheTest, LibcTableComesBackAsBuilt) {
  if (access(kLibc, R_OK) != 0) GTEST_SKIP() << kLibc << " is not installed";
  absl::StatusOr<UnwindTable> built = BuildUnwindTable(kLibc);
  ASSERT_TRUE(built.ok()) << built.status();
  TempDir dir;
  absl::StatusOr<UnwindTableDiskCache> cache =
      UnwindTableDiskCache::Open(dir.path() + "/c", 1 << 30);
  ASSERT_TRUE(cache.ok()) << cache.status();
  ASSERT_TRUE(cache->Store("build-id:" + built->build_id, *built).ok());
  std::optional<UnwindTable> loaded = cache->Load("build-id:" + built->build_id);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_TRUE(SameRows(*built, *loaded));
  EXPECT_EQ(cache->stats().hits, 1u);
  EXPECT_FALSE(cache->Load("build-id:0123").has_value());
  EXPECT_EQ(cache->stats().misses, 1u);
}

TEST(UnwindTableDiskCacheTest, EveryTruncationAndFlippedByteIsRefused) {
  std::string bytes = SerializeUnwindTable(SmallTable());
  ASSERT_TRUE(ParseUnwindTable(bytes).ok());
  for (size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_FALSE(ParseUnwindTable(bytes.substr(0, size)).ok()) << "truncated to " << size;
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string flipped = bytes;
    flipped[i] ^= 0x40;
    EXPECT_FALSE(ParseUnwindTable(flipped).ok()) << "byte " << i << " flipped";
  }
}

// A forger can compute the checksum: what the walk relies on is checked.
TEST(UnwindTableDiskCacheTest, ForgedTablesWithAValidChecksumAreRefused) {
  UnwindTable unsorted = SmallTable();
  std::swap(unsorted.rows[0], unsorted.rows[1]);
  EXPECT_FALSE(ParseUnwindTable(SerializeUnwindTable(unsorted)).ok());

  UnwindTable unknown_rule = SmallTable();
  unknown_rule.rows[1].cfa_rule = 77;
  EXPECT_FALSE(ParseUnwindTable(SerializeUnwindTable(unknown_rule)).ok());

  UnwindTable open_end = SmallTable();
  open_end.rows.back().cfa_rule = PYSTROBE_UNWIND_CFA_RSP;
  EXPECT_FALSE(ParseUnwindTable(SerializeUnwindTable(open_end)).ok());

  UnwindTable path_in_build_id = SmallTable();
  path_in_build_id.build_id = "../../etc";
  EXPECT_FALSE(ParseUnwindTable(SerializeUnwindTable(path_in_build_id)).ok());
}

TEST(UnwindTableDiskCacheTest, CorruptedFileIsDeletedAndMissed) {
  TempDir dir;
  absl::StatusOr<UnwindTableDiskCache> cache = UnwindTableDiskCache::Open(dir.path(), 1 << 30);
  ASSERT_TRUE(cache.ok()) << cache.status();
  ASSERT_TRUE(cache->Store("build-id:00ff", SmallTable()).ok());
  std::string file = dir.path() + "/build-id-00ff.unwind";
  ASSERT_TRUE(std::filesystem::exists(file));
  {
    std::fstream out(file, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(60);
    out.put('\x7f');
  }
  EXPECT_FALSE(cache->Load("build-id:00ff").has_value());
  EXPECT_EQ(cache->stats().rejected, 1u);
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST(UnwindTableDiskCacheTest, LinkInPlaceOfATableIsNotFollowed) {
  TempDir dir;
  absl::StatusOr<UnwindTableDiskCache> cache = UnwindTableDiskCache::Open(dir.path(), 1 << 30);
  ASSERT_TRUE(cache.ok()) << cache.status();
  std::string elsewhere = dir.path() + "/elsewhere";
  {
    std::ofstream out(elsewhere, std::ios::binary);
    out << SerializeUnwindTable(SmallTable());
  }
  std::filesystem::create_symlink(elsewhere, dir.path() + "/build-id-00ff.unwind");
  EXPECT_FALSE(cache->Load("build-id:00ff").has_value());
}

TEST(UnwindTableDiskCacheTest, DirectoryOthersCanWriteIsRefused) {
  TempDir dir;
  std::string shared = dir.path() + "/shared";
  ASSERT_EQ(mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(chmod(shared.c_str(), 0777), 0);
  EXPECT_FALSE(UnwindTableDiskCache::Open(shared, 1 << 30).ok());
}

TEST(UnwindTableDiskCacheTest, StaysWithinItsBoundDroppingTheOldestFirst) {
  TempDir dir;
  size_t one = SerializeUnwindTable(SmallTable()).size();
  absl::StatusOr<UnwindTableDiskCache> cache = UnwindTableDiskCache::Open(dir.path(), 2 * one);
  ASSERT_TRUE(cache.ok()) << cache.status();
  for (const char* key : {"build-id:01", "build-id:02", "build-id:03"}) {
    ASSERT_TRUE(cache->Store(key, SmallTable()).ok());
    usleep(20000);  // distinct modification times
  }
  EXPECT_EQ(cache->stats().evicted, 1u);
  EXPECT_FALSE(cache->Load("build-id:01").has_value());
  EXPECT_TRUE(cache->Load("build-id:03").has_value());
}

}  // namespace
}  // namespace pystrobe

// Where the eval loop's code is in Debian's stripped python3.11, whose
// symbols name only the hot part of _PyEval_EvalFrameDefault.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/elf/elf_file.h"
#include "daemon/recording/python_process.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

constexpr char kDebianPython[] = "/usr/bin/python3.11";
constexpr char kSidPython[] = "/opt/pystrobe-test/sid/usr/bin/python3.14";

TEST(EvalLoopRangesTest, AStrippedBinarysColdPartIsFoundBesideItsHotPart) {
  if (access(kDebianPython, R_OK) != 0) GTEST_SKIP() << kDebianPython << " is not installed";
  absl::StatusOr<ElfFile> binary = ElfFile::Open(kDebianPython);
  ASSERT_TRUE(binary.ok()) << binary.status();
  static constexpr absl::string_view kNames[] = {"_PyEval_EvalFrameDefault",
                                                 "_PyEval_EvalFrameDefault.cold"};
  auto symbols = binary->FindSymbols(kNames);
  ASSERT_TRUE(symbols.contains("_PyEval_EvalFrameDefault"));
  ASSERT_FALSE(symbols.contains("_PyEval_EvalFrameDefault.cold")) << "not stripped";
  const ElfSymbol hot = symbols.at("_PyEval_EvalFrameDefault");

  std::vector<std::pair<uint64_t, uint64_t>> cold = ColdPartsOf(*binary, hot);
  ASSERT_EQ(cold.size(), 1u);
  const auto [start, end] = cold[0];
  // A function of its own in the frame information, apart from the hot part.
  std::vector<uint64_t> starts = binary->FunctionStarts();
  EXPECT_TRUE(std::binary_search(starts.begin(), starts.end(), start));
  EXPECT_TRUE(end <= hot.value || start >= hot.value + hot.size);
  EXPECT_GT(end - start, 4096u);  // most of the loop's rarely taken paths

  std::vector<std::pair<uint64_t, uint64_t>> ranges = EvalLoopRanges(*binary);
  EXPECT_EQ(ranges.size(), 2u);
  EXPECT_NE(std::find(ranges.begin(), ranges.end(),
                      std::pair<uint64_t, uint64_t>{hot.value, hot.value + hot.size}),
            ranges.end());
  EXPECT_NE(std::find(ranges.begin(), ranges.end(), cold[0]), ranges.end());
}

// Debian unstable's 3.14 (a stripped PGO build), when test-pythons.sh made
// its chroot, else Debian's 3.11: the scan once, then from memory.
TEST(EvalLoopRangesTest, ABinaryIsScannedOnceWhateverItsProcesses) {
  const char* path = access(kSidPython, R_OK) == 0 ? kSidPython : kDebianPython;
  if (access(path, R_OK) != 0) GTEST_SKIP() << kDebianPython << " is not installed";
  absl::StatusOr<ElfFile> binary = ElfFile::Open(path);
  ASSERT_TRUE(binary.ok()) << binary.status();
  EvalLoopRangeCache cache;
  const absl::Time start = absl::Now();
  std::vector<std::pair<uint64_t, uint64_t>> scanned = cache.For(*binary);
  const absl::Time scanned_at = absl::Now();
  EXPECT_EQ(cache.hits(), 0u);
  ASSERT_FALSE(scanned.empty());
  // The same binary opened again (another process of it): no scan.
  absl::StatusOr<ElfFile> again = ElfFile::Open(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(cache.For(*again), scanned);
  EXPECT_EQ(cache.hits(), 1u);
  std::cout << path << ": scanned in " << absl::FormatDuration(scanned_at - start)
            << ", from memory in " << absl::FormatDuration(absl::Now() - scanned_at) << "\n";
}

TEST(EvalLoopRangesTest, ASymbolOutsideTheCodeIsNotRead) {
  if (access(kDebianPython, R_OK) != 0) GTEST_SKIP() << kDebianPython << " is not installed";
  absl::StatusOr<ElfFile> binary = ElfFile::Open(kDebianPython);
  ASSERT_TRUE(binary.ok()) << binary.status();
  static constexpr absl::string_view kNames[] = {"PyLong_FromLong"};
  auto symbols = binary->FindSymbols(kNames);
  ASSERT_TRUE(symbols.contains("PyLong_FromLong"));
  // A symbol before .text, or running past its end, is refused, not read.
  EXPECT_TRUE(ColdPartsOf(*binary, {.value = 1, .size = 16}).empty());
  EXPECT_TRUE(ColdPartsOf(*binary,
                          {.value = symbols.at("PyLong_FromLong").value, .size = uint64_t{1} << 40})
                  .empty());
}

}  // namespace
}  // namespace pystrobe

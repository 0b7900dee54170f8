// Where the eval loop's code is in Debian's stripped python3.11, whose
// symbols name only the hot part of _PyEval_EvalFrameDefault.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "daemon/elf/elf_file.h"
#include "daemon/recording/python_process.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

constexpr char kDebianPython[] = "/usr/bin/python3.11";

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

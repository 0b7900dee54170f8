// The symbol cache answers as a scan would, from memory for a binary it has
// seen, and scans again when the file at a path changed.
#include "daemon/python/elf_symbol_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "daemon/elf/elf_file.h"

namespace pystrobe {
namespace {

constexpr absl::string_view kWanted[] = {"_PyRuntime", "PyCode_Type"};
constexpr char kPython[] = "/usr/bin/python3.11";  // CPython linked into the executable
constexpr char kTrue[] = "/bin/true";              // no CPython

TEST(ElfSymbolCacheTest, AnswersAsAScanAndRemembersEachBinary) {
  ElfSymbolCache cache;
  absl::StatusOr<ElfFile> python = ElfFile::Open(kPython);
  ASSERT_TRUE(python.ok()) << python.status();
  absl::StatusOr<ElfFile> other = ElfFile::Open(kTrue);
  ASSERT_TRUE(other.ok()) << other.status();

  auto first = cache.FindSymbols(*python, kWanted);
  EXPECT_EQ(first, python->FindSymbols(kWanted));
  EXPECT_TRUE(first.contains("_PyRuntime"));
  EXPECT_TRUE(cache.FindSymbols(*other, kWanted).empty());
  EXPECT_EQ(cache.hits(), 0u);

  // Opened again (a new process of the same program): answered from memory.
  absl::StatusOr<ElfFile> again = ElfFile::Open(kPython);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(cache.FindSymbols(*again, kWanted), first);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.size(), 2u);

  // Other names are another question.
  constexpr absl::string_view kOnlyRuntime[] = {"_PyRuntime"};
  EXPECT_EQ(cache.FindSymbols(*again, kOnlyRuntime).size(), 1u);
  EXPECT_EQ(cache.hits(), 1u);
}

TEST(ElfSymbolCacheTest, AFileRewrittenInPlaceIsScannedAgain) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("pystrobe-symbol-cache-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path binary = dir / "program";
  std::filesystem::copy_file(kTrue, binary, std::filesystem::copy_options::overwrite_existing);

  ElfSymbolCache cache;
  absl::StatusOr<ElfFile> before = ElfFile::Open(binary);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_TRUE(cache.FindSymbols(*before, kWanted).empty());

  // An upgrade that writes the new program over the old path.
  std::filesystem::copy_file(kPython, binary, std::filesystem::copy_options::overwrite_existing);
  absl::StatusOr<ElfFile> after = ElfFile::Open(binary);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_NE(after->identity(), before->identity());
  EXPECT_TRUE(cache.FindSymbols(*after, kWanted).contains("_PyRuntime"));
  EXPECT_EQ(cache.hits(), 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pystrobe

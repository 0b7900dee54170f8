// ModuleSymbols against the references it must agree with on real files of
// this machine: BCC's reading of the same symbol tables (the product read
// them through BCC before daemon/elf did, and the e2e tests compare native
// names with perf's), and readelf for build ids and code segments. Also
// reports (not asserted) what loading large files costs.
#include "daemon/symbolizer/module_symbols.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "daemon/elf/elf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/symbolizer/bcc_symbols.h"
#include "tests/unit/symbolizer/elf_tools.h"

namespace pystrobe {
namespace {

using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::Not;

// Large and common files: libc (with libc6-dbg, its debug file is found by
// build id), libstdc++ (C++ names), libpython3.11, Debian's python3.11
// (stripped, with a .gnu_debuglink), pystrobe itself (a full .symtab), and
// the test workloads (one found only through its .gnu_debuglink, CRC and
// all; one C++).
std::vector<std::string> RealFiles() {
  std::vector<std::string> paths = {RealPath("/lib/x86_64-linux-gnu/libc.so.6"),
                                    RealPath("/usr/lib/x86_64-linux-gnu/libstdc++.so.6"),
                                    RealPath("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"),
                                    "/usr/bin/python3.11",
                                    PYSTROBE_BINARY,
                                    SYMBOLIZER_TARGET_DEBUGLINK,
                                    SYMBOLIZER_TARGET_CXX};
  std::erase_if(paths, [](const std::string& path) { return access(path.c_str(), R_OK) != 0; });
  return paths;
}

std::vector<BccSymbol> OurFunctionSymbols(const ElfFile& file) {
  std::vector<BccSymbol> symbols;
  absl::Status status =
      ForEachFunctionSymbol(file, [&](absl::string_view name, uint64_t start, uint64_t size) {
        symbols.push_back({std::string(name), start, size});
      });
  EXPECT_TRUE(status.ok()) << status;
  return symbols;
}

// The symbols one list has and the other lacks, a few of each, for the log.
std::string Difference(std::vector<BccSymbol> ours, std::vector<BccSymbol> bcc) {
  std::vector<BccSymbol> only_ours, only_bcc;
  std::set_difference(ours.begin(), ours.end(), bcc.begin(), bcc.end(),
                      std::back_inserter(only_ours));
  std::set_difference(bcc.begin(), bcc.end(), ours.begin(), ours.end(),
                      std::back_inserter(only_bcc));
  std::string out =
      absl::StrFormat("%zu only ours, %zu only BCC's", only_ours.size(), only_bcc.size());
  for (const auto& [label, list] : {std::pair{"ours", &only_ours}, {"BCC's", &only_bcc}}) {
    for (size_t i = 0; i < std::min<size_t>(list->size(), 5); ++i) {
      const BccSymbol& s = (*list)[i];
      out += absl::StrFormat("\n  only %s: %s %#x %u", label, s.name, s.start, s.size);
    }
  }
  return out;
}

TEST(ModuleSymbolsTest, FunctionSymbolsOfRealFilesAreTheOnesBccReads) {
  std::vector<std::string> paths = RealFiles();
  ASSERT_GE(paths.size(), 5u) << "libc, libstdc++ and python3.11 are part of the platform";
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    absl::StatusOr<ElfFile> file = ElfFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    std::vector<BccSymbol> ours = OurFunctionSymbols(*file);
    absl::StatusOr<std::vector<BccSymbol>> bcc = BccFunctionSymbols(path);
    ASSERT_TRUE(bcc.ok()) << bcc.status();
    std::sort(ours.begin(), ours.end());
    std::sort(bcc->begin(), bcc->end());
    EXPECT_THAT(ours, Not(IsEmpty()));
    EXPECT_TRUE(ours == *bcc) << Difference(ours, *bcc);
  }
}

TEST(ModuleSymbolsTest, DebugFilesAddWhatTheStrippedFileLacks) {
  // Only through its .gnu_debuglink: the stripped file itself has no
  // function symbols but its imports.
  absl::StatusOr<std::shared_ptr<const ModuleSymbols>> linked =
      ModuleSymbols::Load(SYMBOLIZER_TARGET_DEBUGLINK);
  ASSERT_TRUE(linked.ok()) << linked.status();
  uint64_t work =
      NmAddress(std::string(SYMBOLIZER_TARGET_DEBUGLINK) + ".debug", "pystrobe_target_work");
  ASSERT_NE(work, 0u);
  // The workload's text segment has equal file offsets and addresses.
  EXPECT_EQ((*linked)->FunctionAt(work), "pystrobe_target_work");
}

TEST(ModuleSymbolsTest, BuildIdAndCodeSegmentsOfRealBinariesMatchReadelf) {
  std::vector<std::string> paths = {
      "/usr/bin/python3.11", RealPath("/lib/x86_64-linux-gnu/libc.so.6"),
      RealPath("/lib64/ld-linux-x86-64.so.2"), RealPath("/proc/self/exe"), SYMBOLIZER_TARGET_NOPIE};
  std::erase_if(paths, [](const std::string& path) { return access(path.c_str(), R_OK) != 0; });
  ASSERT_GE(paths.size(), 3u) << "python3.11 and libc are part of the platform";
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    absl::StatusOr<std::shared_ptr<const ModuleSymbols>> symbols = ModuleSymbols::Load(path);
    ASSERT_TRUE(symbols.ok()) << symbols.status();
    std::string expected = ReadelfBuildId(path);
    ASSERT_THAT(expected, MatchesRegex("[0-9a-f]+")) << "readelf found no build id";
    EXPECT_EQ((*symbols)->build_id(), expected);
    EXPECT_EQ((*symbols)->code_segments(), ReadelfCodeSegments(path));
    EXPECT_THAT((*symbols)->code_segments(), Not(IsEmpty()));
  }
}

TEST(ModuleSymbolsTest, KeepsTheBuildIdTheLinkerWasGiven) {
  absl::StatusOr<std::shared_ptr<const ModuleSymbols>> symbols =
      ModuleSymbols::Load(SYMBOLIZER_PLUGIN);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  EXPECT_EQ((*symbols)->build_id(), SYMBOLIZER_PLUGIN_BUILD_ID);
  EXPECT_EQ(ReadelfBuildId(SYMBOLIZER_PLUGIN), SYMBOLIZER_PLUGIN_BUILD_ID);
}

TEST(ModuleSymbolsTest, FileLinkedWithoutBuildIdHasAnEmptyOneAndItsSegments) {
  absl::StatusOr<std::shared_ptr<const ModuleSymbols>> symbols =
      ModuleSymbols::Load(SYMBOLIZER_PLUGIN_NO_BUILD_ID);
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  EXPECT_EQ((*symbols)->build_id(), "");
  EXPECT_EQ((*symbols)->code_segments(), ReadelfCodeSegments(SYMBOLIZER_PLUGIN_NO_BUILD_ID));
}

TEST(ModuleSymbolsTest, FilesThatAreNotElfFailNamingTheFile) {
  for (const std::string path : {"/proc/self/status", "/nonexistent/pystrobe", "/dev/null"}) {
    absl::StatusOr<std::shared_ptr<const ModuleSymbols>> symbols = ModuleSymbols::Load(path);
    ASSERT_FALSE(symbols.ok()) << path;
    EXPECT_THAT(symbols.status().message(), testing::HasSubstr(path));
  }
}

// The vDSO, read from memory, against readelf and BCC of a copy written to a
// file.
TEST(ModuleSymbolsTest, VdsoMatchesReadelfAndBccOfItsCopy) {
  absl::Span<const uint8_t> image = VdsoImage();
  if (image.empty()) GTEST_SKIP() << "no vDSO mapped";
  std::string copy = ::testing::TempDir() + "/vdso.so";
  std::ofstream(copy, std::ios::binary)
      .write(reinterpret_cast<const char*>(image.data()),
             static_cast<std::streamsize>(image.size()));

  std::shared_ptr<const ModuleSymbols> symbols = ModuleSymbols::LoadVdso();
  EXPECT_EQ(symbols->build_id(), ReadelfBuildId(copy));
  EXPECT_EQ(symbols->code_segments(), ReadelfCodeSegments(copy));
  EXPECT_GT(symbols->symbol_count(), 0u);
  absl::StatusOr<ElfFile> in_memory = ElfFile::InMemory(image, "[vdso]");
  ASSERT_TRUE(in_memory.ok()) << in_memory.status();
  std::vector<BccSymbol> ours = OurFunctionSymbols(*in_memory);
  absl::StatusOr<std::vector<BccSymbol>> bcc = BccFunctionSymbols(copy);
  ASSERT_TRUE(bcc.ok()) << bcc.status();
  std::sort(ours.begin(), ours.end());
  std::sort(bcc->begin(), bcc->end());
  EXPECT_TRUE(ours == *bcc) << Difference(ours, *bcc);
}

template <typename Load>
double MedianMilliseconds(Load load, int runs) {
  std::vector<double> ms;
  load();  // Warms the page cache.
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    load();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Reports (not asserted) what ModuleSymbols::Load costs for large files of
// this machine, warm page cache, and what reading their function symbols
// costs us and BCC: the median of 15 runs each.
TEST(ModuleSymbolsCostTest, ReportsLoadTimeOfLargeLibraries) {
  for (const std::string& path : RealFiles()) {
    size_t functions = 0;
    double load_ms = MedianMilliseconds(
        [&] {
          absl::StatusOr<std::shared_ptr<const ModuleSymbols>> loaded = ModuleSymbols::Load(path);
          ASSERT_TRUE(loaded.ok()) << loaded.status();
          functions = (*loaded)->symbol_count();
        },
        15);
    size_t symbols = 0;
    double ours_ms = MedianMilliseconds(
        [&] {
          absl::StatusOr<ElfFile> file = ElfFile::Open(path);
          ASSERT_TRUE(file.ok()) << file.status();
          symbols = OurFunctionSymbols(*file).size();
        },
        15);
    double bcc_ms = MedianMilliseconds([&] { BccFunctionSymbols(path).IgnoreError(); }, 15);
    std::cout << absl::StrFormat(
        "%s: ModuleSymbols::Load %.2f ms (%zu functions); reading its %zu function symbols: "
        "daemon/elf %.2f ms, BCC %.2f ms\n",
        path, load_ms, functions, symbols, ours_ms, bcc_ms);
  }
}

}  // namespace
}  // namespace pystrobe

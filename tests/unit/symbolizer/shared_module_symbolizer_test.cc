// What SharedModuleSymbolizer adds to the NativeSymbolizer contract (pinned
// for both implementations in native_symbolizer_test.cc): module tables are
// read once and shared between processes, and the cache is bounded.
#include "daemon/symbolizer/shared_module_symbolizer.h"

#include <sys/sysmacros.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/symbolizer/module_symbol_cache.h"
#include "daemon/symbolizer/module_symbols.h"
#include "daemon/symbolizer/proc_maps.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/symbolizer/elf_tools.h"
#include "tests/unit/symbolizer/symbolizer_target_process.h"

namespace pystrobe {
namespace {

using ::testing::AnyOf;
using ::testing::ElementsAreArray;
using ::testing::EndsWith;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Optional;
using ::testing::SizeIs;
using ::testing::StartsWith;

TEST(ParseExecutableMappingsTest, KeepsExecutableFilesAndVdsoWithDevInodeAndOffset) {
  std::vector<ExecutableMapping> mappings = ParseExecutableMappings(
      "55d0c0000000-55d0c0001000 r--p 00000000 fe:01 1234 /usr/bin/prog\n"
      "55d0c0001000-55d0c0002000 r-xp 00001000 fe:01 1234 /usr/bin/prog\n"
      "7f0000000000-7f0000100000 r-xp 00026000 08:02 99     /usr/lib/my lib.so (deleted)\n"
      "7f0000200000-7f0000201000 rw-p 00000000 00:00 0 \n"
      "7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]\n"
      "7ffe00000000-7ffe00021000 r-xp 00000000 00:00 0                          [stack]\n");
  ASSERT_THAT(mappings, SizeIs(3));
  EXPECT_EQ(mappings[0].start, 0x55d0c0001000u);
  EXPECT_EQ(mappings[0].end, 0x55d0c0002000u);
  EXPECT_EQ(mappings[0].file_offset, 0x1000u);
  EXPECT_EQ(mappings[0].dev, makedev(0xfe, 0x01));
  EXPECT_EQ(mappings[0].inode, 1234u);
  EXPECT_EQ(mappings[0].path, "/usr/bin/prog");
  EXPECT_FALSE(mappings[0].deleted);
  EXPECT_EQ(mappings[1].path, "/usr/lib/my lib.so");
  EXPECT_TRUE(mappings[1].deleted);
  EXPECT_EQ(mappings[1].file_offset, 0x26000u);
  EXPECT_TRUE(mappings[2].is_vdso());
  EXPECT_THAT(ParseExecutableMappings("garbage\n\n1-2 r-xp zz 00:00 0 /x\n"), IsEmpty());
}

TEST(ModuleSymbolsTest, LoadFailsForFilesThatAreNotElf) {
  EXPECT_FALSE(ModuleSymbols::Load("/proc/self/status").ok());
  EXPECT_FALSE(ModuleSymbols::Load("/nonexistent/pystrobe").ok());
}

TEST(ModuleSymbolsTest, VdsoHasFunctions) {
  std::shared_ptr<const ModuleSymbols> vdso = ModuleSymbols::LoadVdso();
  ASSERT_NE(vdso, nullptr);
  EXPECT_GT(vdso->symbol_count(), 0u);
}

std::unique_ptr<ProcessSymbols> Snapshot(NativeSymbolizer& symbolizer, uint32_t pid) {
  absl::StatusOr<std::unique_ptr<ProcessSymbols>> symbols = symbolizer.ForProcess(pid);
  EXPECT_TRUE(symbols.ok()) << symbols.status();
  return symbols.ok() ? *std::move(symbols) : nullptr;
}

TEST(SharedModuleSymbolizerTest, ProcessesOfOneBinaryLoadEachModuleOnce) {
  auto first = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  auto second = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  SharedModuleSymbolizer symbolizer;
  auto first_symbols = Snapshot(symbolizer, first->pid());
  ASSERT_NE(first_symbols, nullptr);
  ModuleSymbolCache::Stats after_first = symbolizer.cache_stats();
  // The target, libc, ld.so and the vDSO at least.
  EXPECT_GE(after_first.loads, 4u);
  auto second_symbols = Snapshot(symbolizer, second->pid());
  ASSERT_NE(second_symbols, nullptr);
  ModuleSymbolCache::Stats after_second = symbolizer.cache_stats();
  EXPECT_EQ(after_second.loads, after_first.loads);
  EXPECT_EQ(after_second.hits, after_first.hits + after_first.loads);
  EXPECT_EQ(after_second.bytes, after_first.bytes);

  for (auto* target : {first.get(), second.get()}) {
    auto& symbols = target == first.get() ? first_symbols : second_symbols;
    EXPECT_EQ(symbols->Symbolize(target->address("work")), "pystrobe_target_work");
    EXPECT_THAT(symbols->Symbolize(target->address("libc")), AnyOf("qsort", "__GI_qsort"));
  }
}

TEST(SharedModuleSymbolizerTest, NamesVdsoFunctions) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  absl::StatusOr<std::vector<ExecutableMapping>> mappings = ReadExecutableMappings(target->pid());
  ASSERT_TRUE(mappings.ok()) << mappings.status();
  const ExecutableMapping* vdso = nullptr;
  for (const ExecutableMapping& mapping : *mappings) {
    if (mapping.is_vdso()) vdso = &mapping;
  }
  if (vdso == nullptr) GTEST_SKIP() << "no vDSO mapped";
  SharedModuleSymbolizer symbolizer;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  // Every address of the vDSO gets a name: a function's, or "[vdso]+0x...".
  // At least one of its first few hundred bytes lies in a function.
  bool named = false;
  for (uint64_t addr = vdso->start; addr < vdso->end; addr += 16) {
    std::string name = symbols->Symbolize(addr);
    EXPECT_NE(name, "[unknown]");
    if (name.rfind("[vdso]+0x", 0) != 0) named = true;
  }
  EXPECT_TRUE(named);
}

TEST(SharedModuleSymbolizerTest, UnpinnedModulesAreEvictedBeyondTheBound) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  // A bound every table exceeds: only what a ProcessSymbols holds stays.
  SharedModuleSymbolizer symbolizer({.max_cache_bytes = 1});
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  ModuleSymbolCache::Stats pinned = symbolizer.cache_stats();
  EXPECT_EQ(pinned.evictions, 0u);
  EXPECT_GE(pinned.modules, 4u);
  EXPECT_EQ(symbols->Symbolize(target->address("work")), "pystrobe_target_work");

  symbols.reset();
  // The next load evicts every table nobody holds any more.
  auto cxx = TargetProcess::Start({SYMBOLIZER_TARGET_CXX});
  ASSERT_NE(cxx, nullptr);
  auto cxx_symbols = Snapshot(symbolizer, cxx->pid());
  ASSERT_NE(cxx_symbols, nullptr);
  ModuleSymbolCache::Stats after = symbolizer.cache_stats();
  EXPECT_GE(after.evictions, 1u);
  EXPECT_LT(after.modules, pinned.modules + 3);
  EXPECT_EQ(cxx_symbols->Symbolize(cxx->address("work") + 2),
            "pystrobe::testing::Worker::Spin(int)");

  // A generous bound evicts nothing.
  SharedModuleSymbolizer roomy;
  auto again = Snapshot(roomy, target->pid());
  again.reset();
  auto cxx_again = Snapshot(roomy, cxx->pid());
  EXPECT_EQ(roomy.cache_stats().evictions, 0u);
}

// The ELF virtual address of a location, through its file's segments.
std::optional<uint64_t> VirtualAddress(const NativeCodeLocation& location) {
  for (const CodeSegment& segment : location.code_segments) {
    if (location.file_offset - segment.file_offset < segment.size) {
      return location.file_offset - segment.file_offset + segment.vaddr;
    }
  }
  return std::nullopt;
}

// Resolve says which file holds a frame (its path as mapped, its build id)
// and where: the file offset, which the segments turn into the address nm
// gives the function, for PIE and non-PIE executables and libraries alike.
TEST(SharedModuleSymbolizerTest, ResolveGivesTheMappedFileBuildIdAndOffset) {
  for (const char* binary : {SYMBOLIZER_TARGET_PIE, SYMBOLIZER_TARGET_NOPIE}) {
    SCOPED_TRACE(binary);
    auto target = TargetProcess::Start({binary});
    ASSERT_NE(target, nullptr);
    SharedModuleSymbolizer symbolizer;
    auto symbols = Snapshot(symbolizer, target->pid());
    ASSERT_NE(symbols, nullptr);

    NativeFrameSymbol work = symbols->Resolve(target->address("work"));
    EXPECT_EQ(work.name, "pystrobe_target_work");
    ASSERT_TRUE(work.location.has_value());
    EXPECT_EQ(work.location->path, RealPath(binary));
    EXPECT_EQ(work.location->build_id, ReadelfBuildId(binary));
    EXPECT_THAT(work.location->build_id, Not(IsEmpty()));
    EXPECT_THAT(VirtualAddress(*work.location),
                Optional(NmAddress(binary, "pystrobe_target_work")));

    NativeFrameSymbol libc = symbols->Resolve(target->address("libc"));
    ASSERT_TRUE(libc.location.has_value());
    EXPECT_THAT(std::string(libc.location->path), EndsWith("/libc.so.6"));
    EXPECT_EQ(libc.location->build_id, ReadelfBuildId(std::string(libc.location->path)));
    EXPECT_THAT(libc.location->code_segments,
                ElementsAreArray(ReadelfCodeSegments(std::string(libc.location->path))));

    uint64_t plugin = target->Request(std::string("dlopen ") + SYMBOLIZER_PLUGIN, "plugin");
    ASSERT_NE(plugin, 0u);
    NativeFrameSymbol in_plugin = symbols->Resolve(plugin);
    EXPECT_EQ(in_plugin.name, "pystrobe_plugin_work");
    ASSERT_TRUE(in_plugin.location.has_value());
    EXPECT_EQ(in_plugin.location->path, RealPath(SYMBOLIZER_PLUGIN));
    EXPECT_EQ(in_plugin.location->build_id, SYMBOLIZER_PLUGIN_BUILD_ID);
    EXPECT_THAT(VirtualAddress(*in_plugin.location),
                Optional(NmAddress(SYMBOLIZER_PLUGIN, "pystrobe_plugin_work")));

    EXPECT_FALSE(symbols->Resolve(8).location.has_value()) << "no mapping at page 0";
    EXPECT_EQ(symbols->Resolve(8).name, "[unknown]");
  }
}

// A stripped binary still has its build id and offsets: a reader with the
// unstripped file (or its debug file) can name what pystrobe could not.
TEST(SharedModuleSymbolizerTest, UnsymbolizedFramesStillHaveTheirFileAndBuildId) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_STRIPPED});
  ASSERT_NE(target, nullptr);
  SharedModuleSymbolizer symbolizer;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  NativeFrameSymbol work = symbols->Resolve(target->address("work"));
  EXPECT_THAT(work.name, StartsWith("symbolizer_target_stripped+0x"));
  ASSERT_TRUE(work.location.has_value());
  EXPECT_EQ(work.location->build_id, ReadelfBuildId(SYMBOLIZER_TARGET_STRIPPED));
  EXPECT_EQ(work.location->build_id, ReadelfBuildId(SYMBOLIZER_TARGET_PIE)) << "strip keeps it";
  EXPECT_THAT(VirtualAddress(*work.location),
              Optional(NmAddress(SYMBOLIZER_TARGET_PIE, "pystrobe_target_work")));
}

// ProcessSymbols hold the cache, so they work after the symbolizer is gone.
TEST(SharedModuleSymbolizerTest, ProcessSymbolsOutliveTheSymbolizer) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  auto symbolizer = std::make_unique<SharedModuleSymbolizer>();
  auto symbols = Snapshot(*symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  symbolizer.reset();
  uint64_t plugin = target->Request(std::string("dlopen ") + SYMBOLIZER_PLUGIN, "plugin");
  ASSERT_NE(plugin, 0u);
  EXPECT_EQ(symbols->Symbolize(plugin), "pystrobe_plugin_work");
}

}  // namespace
}  // namespace pystrobe

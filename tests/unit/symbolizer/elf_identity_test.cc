// The build id and code segments pystrobe reads itself, against readelf's
// view of real files on this machine and of test libraries linked with a
// known build id (tests/workloads/symbolizer).
#include "daemon/symbolizer/elf_identity.h"

#include <elf.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/symbolizer/module_symbols.h"
#include "daemon/symbolizer/proc_maps.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/symbolizer/elf_tools.h"

namespace pystrobe {
namespace {

using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::Not;

// Files of this machine the daemon meets most: Debian's python3.11 (non-PIE),
// libc (PIE), the dynamic loader, and this test (built here).
std::vector<std::string> RealBinaries() {
  std::vector<std::string> paths = {
      "/usr/bin/python3.11", RealPath("/lib/x86_64-linux-gnu/libc.so.6"),
      RealPath("/lib64/ld-linux-x86-64.so.2"), RealPath("/proc/self/exe"), SYMBOLIZER_TARGET_NOPIE};
  std::erase_if(paths, [](const std::string& path) { return access(path.c_str(), R_OK) != 0; });
  return paths;
}

TEST(ElfIdentityTest, BuildIdAndCodeSegmentsOfRealBinariesMatchReadelf) {
  std::vector<std::string> paths = RealBinaries();
  ASSERT_GE(paths.size(), 3u) << "python3.11 and libc are part of the platform";
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    absl::StatusOr<ElfIdentity> identity = ReadElfIdentity(path);
    ASSERT_TRUE(identity.ok()) << identity.status();
    std::string expected = ReadelfBuildId(path);
    ASSERT_THAT(expected, MatchesRegex("[0-9a-f]+")) << "readelf found no build id";
    EXPECT_EQ(identity->build_id, expected);
    EXPECT_EQ(identity->code_segments, ReadelfCodeSegments(path));
    EXPECT_THAT(identity->code_segments, Not(IsEmpty()));
  }
}

TEST(ElfIdentityTest, ReadsTheBuildIdTheLinkerWasGiven) {
  absl::StatusOr<ElfIdentity> identity = ReadElfIdentity(SYMBOLIZER_PLUGIN);
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_EQ(identity->build_id, SYMBOLIZER_PLUGIN_BUILD_ID);
  EXPECT_EQ(ReadelfBuildId(SYMBOLIZER_PLUGIN), SYMBOLIZER_PLUGIN_BUILD_ID);
}

TEST(ElfIdentityTest, FileLinkedWithoutBuildIdHasAnEmptyOneAndItsSegments) {
  absl::StatusOr<ElfIdentity> identity = ReadElfIdentity(SYMBOLIZER_PLUGIN_NO_BUILD_ID);
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_EQ(identity->build_id, "");
  EXPECT_EQ(identity->code_segments, ReadelfCodeSegments(SYMBOLIZER_PLUGIN_NO_BUILD_ID));
}

TEST(ElfIdentityTest, FilesThatAreNotElfFail) {
  EXPECT_FALSE(ReadElfIdentity("/proc/self/status").ok());
  EXPECT_FALSE(ReadElfIdentity("/nonexistent/pystrobe").ok());
  EXPECT_FALSE(ReadElfIdentity("/dev/null").ok());
}

// The vDSO, read from memory, against readelf of a copy written to a file.
TEST(ElfIdentityTest, VdsoInMemoryMatchesReadelfOfItsCopy) {
  absl::StatusOr<std::vector<ExecutableMapping>> mappings =
      ReadExecutableMappings(static_cast<uint32_t>(getpid()));
  ASSERT_TRUE(mappings.ok()) << mappings.status();
  const ExecutableMapping* vdso = nullptr;
  for (const ExecutableMapping& mapping : *mappings) {
    if (mapping.is_vdso()) vdso = &mapping;
  }
  if (vdso == nullptr) GTEST_SKIP() << "no vDSO mapped";
  const auto* image = reinterpret_cast<const char*>(vdso->start);
  size_t size = vdso->end - vdso->start;
  std::string copy = ::testing::TempDir() + "/vdso.so";
  std::ofstream(copy, std::ios::binary).write(image, static_cast<std::streamsize>(size));

  absl::StatusOr<ElfIdentity> identity = ReadElfIdentityInMemory(image, size);
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_EQ(identity->build_id, ReadelfBuildId(copy));
  EXPECT_EQ(identity->code_segments, ReadelfCodeSegments(copy));
  // And what the symbol tables keep for the vDSO module.
  std::shared_ptr<const ModuleSymbols> symbols = ModuleSymbols::LoadVdso();
  EXPECT_EQ(symbols->build_id(), identity->build_id);
  EXPECT_EQ(symbols->code_segments(), identity->code_segments);
  // A short image is refused, not read past.
  EXPECT_FALSE(ReadElfIdentityInMemory(image, 16).ok());
}

TEST(ElfIdentityTest, ModuleSymbolsKeepTheFilesBuildIdAndSegments) {
  absl::StatusOr<std::shared_ptr<const ModuleSymbols>> symbols =
      ModuleSymbols::Load("/usr/bin/python3.11");
  ASSERT_TRUE(symbols.ok()) << symbols.status();
  EXPECT_EQ((*symbols)->build_id(), ReadelfBuildId("/usr/bin/python3.11"));
  EXPECT_EQ((*symbols)->code_segments(), ReadelfCodeSegments("/usr/bin/python3.11"));
}

}  // namespace
}  // namespace pystrobe

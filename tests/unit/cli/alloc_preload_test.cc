#include "daemon/cli/alloc_preload.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AllocPreloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/alloc_preload_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0755) {
    std::filesystem::path path = dir_ / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path.string();
  }

  std::filesystem::path dir_;
};

TEST_F(AllocPreloadTest, TheLibraryIsFoundBesideTheBinaryThenInLibPystrobe) {
  std::string binary = Write("usr/bin/pystrobe", "");
  EXPECT_FALSE(FindAllocationLibrary(binary).ok());
  std::string installed = Write("usr/lib/pystrobe/libpystrobe-alloc.so", "");
  EXPECT_EQ(FindAllocationLibrary(binary).value(), installed);
  std::string built = Write("usr/bin/libpystrobe-alloc.so", "");
  EXPECT_EQ(FindAllocationLibrary(binary).value(), built);
}

TEST_F(AllocPreloadTest, ACommandIsFoundAsExecvpFindsIt) {
  std::string tool = Write("b/tool", "#!/bin/sh\n");
  Write("a/tool", "not executable", 0644);
  EXPECT_EQ(ResolveCommand("tool", (dir_ / "a").string() + ":" + (dir_ / "b").string()).value(),
            tool);
  EXPECT_EQ(ResolveCommand(tool, "").value(), tool);
  EXPECT_FALSE(ResolveCommand("tool", (dir_ / "a").string()).ok());
}

TEST_F(AllocPreloadTest, DynamicExecutablesAndScriptsTakeTheLibraryStaticAndSetuidOnesDoNot) {
  EXPECT_TRUE(CheckPreloadable("/bin/sh").ok());
  EXPECT_FALSE(IsStaticExecutable("/bin/sh"));
  EXPECT_TRUE(CheckPreloadable(Write("script", "#!/bin/sh\ntrue\n")).ok());
  absl::Status setuid = CheckPreloadable(Write("setuid", "#!/bin/sh\n", 04755));
  EXPECT_THAT(setuid.message(), HasSubstr("set-user-ID"));
  // ldconfig is linked statically on Debian.
  if (access("/sbin/ldconfig", X_OK) == 0 && IsStaticExecutable("/sbin/ldconfig")) {
    EXPECT_THAT(CheckPreloadable("/sbin/ldconfig").message(), HasSubstr("statically linked"));
  }
}

TEST_F(AllocPreloadTest, OurLibraryGoesFirstAndTheTargetsOwnPreloadStays) {
  EXPECT_THAT(AllocationPreloadEnvironment("/l/a.so", 4096, nullptr),
              ElementsAre("LD_PRELOAD=/l/a.so", "PYSTROBE_ALLOC_SAMPLE_BYTES=4096"));
  EXPECT_THAT(AllocationPreloadEnvironment("/l/a.so", 4096, "/x/jemalloc.so"),
              ElementsAre("LD_PRELOAD=/l/a.so:/x/jemalloc.so", "PYSTROBE_ALLOC_SAMPLE_BYTES=4096"));
}

}  // namespace
}  // namespace pystrobe

// Tests of both NativeSymbolizers (SharedModuleSymbolizer, the product's, and
// BccNativeSymbolizer) against real processes: the workloads in
// tests/workloads/symbolizer print addresses of their own functions and of
// libc, and the test checks the names that come back, also after exit.
#include "daemon/symbolizer/native_symbolizer.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "daemon/symbolizer/shared_module_symbolizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/symbolizer/bcc_native_symbolizer.h"
#include "tests/unit/symbolizer/symbolizer_target_process.h"

namespace pystrobe {
namespace {

using ::testing::AnyOf;

// With libc6-dbg installed the debug file adds glibc's internal alias at the
// same address, and which alias BCC returns is not specified.
auto IsQsort() { return AnyOf("qsort", "__GI_qsort"); }

enum class Implementation { kSharedModule, kBcc };

std::unique_ptr<NativeSymbolizer> MakeSymbolizer(
    Implementation implementation, absl::Duration min_refresh_interval = absl::Seconds(1)) {
  if (implementation == Implementation::kBcc) {
    return std::make_unique<BccNativeSymbolizer>(
        BccNativeSymbolizer::Options{.min_refresh_interval = min_refresh_interval});
  }
  return std::make_unique<SharedModuleSymbolizer>(
      SharedModuleSymbolizer::Options{.min_refresh_interval = min_refresh_interval});
}

// The behaviours both implementations promise (native_symbolizer.h).
class NativeSymbolizerTest : public ::testing::TestWithParam<Implementation> {
 protected:
  std::unique_ptr<NativeSymbolizer> NewSymbolizer(
      absl::Duration min_refresh_interval = absl::Seconds(1)) {
    return MakeSymbolizer(GetParam(), min_refresh_interval);
  }
};

std::unique_ptr<ProcessSymbols> Snapshot(NativeSymbolizer& symbolizer, uint32_t pid) {
  absl::StatusOr<std::unique_ptr<ProcessSymbols>> symbols = symbolizer.ForProcess(pid);
  EXPECT_TRUE(symbols.ok()) << symbols.status();
  return symbols.ok() ? *std::move(symbols) : nullptr;
}

TEST_P(NativeSymbolizerTest, NamesNonPieExecutableAndLibcFunctions) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_NOPIE});
  ASSERT_NE(target, nullptr);
  std::unique_ptr<NativeSymbolizer> owner = NewSymbolizer();
  NativeSymbolizer& symbolizer = *owner;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->Symbolize(target->address("work") + 1), "pystrobe_target_work");
  EXPECT_THAT(symbols->Symbolize(target->address("libc") + 1), IsQsort());
}

TEST_P(NativeSymbolizerTest, NamesPieExecutableAndLibcFunctions) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  std::unique_ptr<NativeSymbolizer> owner = NewSymbolizer();
  NativeSymbolizer& symbolizer = *owner;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->Symbolize(target->address("work")), "pystrobe_target_work");
  EXPECT_THAT(symbols->Symbolize(target->address("libc")), IsQsort());
}

TEST_P(NativeSymbolizerTest, DemanglesCxxNames) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_CXX});
  ASSERT_NE(target, nullptr);
  std::unique_ptr<NativeSymbolizer> owner = NewSymbolizer();
  NativeSymbolizer& symbolizer = *owner;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->Symbolize(target->address("work") + 2),
            "pystrobe::testing::Worker::Spin(int)");
}

TEST_P(NativeSymbolizerTest, FallsBackToModuleAndFileOffsetWithoutSymbols) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_STRIPPED});
  ASSERT_NE(target, nullptr);
  std::unique_ptr<NativeSymbolizer> owner = NewSymbolizer();
  NativeSymbolizer& symbolizer = *owner;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  // The PIE's text segment has equal file offsets and virtual addresses, so
  // the offset in the file is the offset from the load base.
  uint64_t work = target->address("work");
  EXPECT_EQ(symbols->Symbolize(work),
            absl::StrFormat("symbolizer_target_stripped+0x%x", work - target->address("base")));
  EXPECT_THAT(symbols->Symbolize(target->address("libc")), IsQsort());
}

TEST_P(NativeSymbolizerTest, FindsSymbolsThroughGnuDebuglinkEvenAfterExit) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_DEBUGLINK});
  ASSERT_NE(target, nullptr);
  std::unique_ptr<NativeSymbolizer> owner = NewSymbolizer();
  NativeSymbolizer& symbolizer = *owner;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  uint64_t work = target->address("work");
  EXPECT_EQ(symbols->Symbolize(work), "pystrobe_target_work");
  target->KillAndReap();
  EXPECT_EQ(symbols->Symbolize(work + 1), "pystrobe_target_work");
}

// The profiler names frames in batches, often after the process is gone.
TEST_P(NativeSymbolizerTest, NamesSurviveProcessExit) {
  for (const char* path : {SYMBOLIZER_TARGET_NOPIE, SYMBOLIZER_TARGET_PIE}) {
    SCOPED_TRACE(path);
    auto target = TargetProcess::Start({path});
    ASSERT_NE(target, nullptr);
    std::unique_ptr<NativeSymbolizer> owner = NewSymbolizer();
    NativeSymbolizer& symbolizer = *owner;
    auto symbols = Snapshot(symbolizer, target->pid());
    ASSERT_NE(symbols, nullptr);
    target->KillAndReap();
    ASSERT_NE(access(absl::StrFormat("/proc/%d", target->pid()).c_str(), F_OK), 0);
    EXPECT_EQ(symbols->Symbolize(target->address("work")), "pystrobe_target_work");
    EXPECT_THAT(symbols->Symbolize(target->address("libc")), IsQsort());
  }
}

// Without eager loading BCC reads symbol tables at the first lookup, through
// the file descriptors it opened in ForProcess.
TEST(BccNativeSymbolizerTest, LazilyLoadedNamesSurviveProcessExit) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  BccNativeSymbolizer symbolizer({.load_eagerly = false, .lazy_names = true});
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  target->KillAndReap();
  EXPECT_EQ(symbols->Symbolize(target->address("work")), "pystrobe_target_work");
  EXPECT_THAT(symbols->Symbolize(target->address("libc")), IsQsort());
}

// Package upgrades delete binaries that running processes still execute; BCC
// finds nothing at the path, so the file is read through /proc/PID/map_files.
TEST_P(NativeSymbolizerTest, NamesFunctionsOfDeletedExecutable) {
  if (geteuid() != 0) GTEST_SKIP() << "/proc/PID/map_files needs CAP_SYS_ADMIN";
  char path[] = "/tmp/pystrobe-deleted-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ifstream source(SYMBOLIZER_TARGET_PIE, std::ios::binary);
  std::ofstream(path, std::ios::binary) << source.rdbuf();
  ASSERT_EQ(chmod(path, 0755), 0);
  auto target = TargetProcess::Start({path});
  ASSERT_NE(target, nullptr);
  ASSERT_EQ(unlink(path), 0);

  std::unique_ptr<NativeSymbolizer> owner = NewSymbolizer();
  NativeSymbolizer& symbolizer = *owner;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  target->KillAndReap();
  EXPECT_EQ(symbols->Symbolize(target->address("work") + 1), "pystrobe_target_work");
  EXPECT_THAT(symbols->Symbolize(target->address("libc")), IsQsort());
}

TEST_P(NativeSymbolizerTest, RefreshesForLibrariesDlopenedAfterSnapshot) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  std::unique_ptr<NativeSymbolizer> owner = NewSymbolizer();
  NativeSymbolizer& symbolizer = *owner;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  uint64_t plugin = target->Request(std::string("dlopen ") + SYMBOLIZER_PLUGIN, "plugin");
  ASSERT_NE(plugin, 0u);
  EXPECT_EQ(symbols->Symbolize(plugin), "pystrobe_plugin_work");
  // The snapshot taken by the refresh survives exit like the first one.
  target->KillAndReap();
  EXPECT_EQ(symbols->Symbolize(plugin + 1), "pystrobe_plugin_work");
  EXPECT_EQ(symbols->Symbolize(target->address("work")), "pystrobe_target_work");
}

TEST_P(NativeSymbolizerTest, RefreshIsRateLimited) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  std::unique_ptr<NativeSymbolizer> owner = NewSymbolizer(absl::Hours(1));
  NativeSymbolizer& symbolizer = *owner;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  // Spends the one refresh allowed this hour on an address nothing maps.
  EXPECT_EQ(symbols->Symbolize(8), "[unknown]");
  uint64_t plugin = target->Request(std::string("dlopen ") + SYMBOLIZER_PLUGIN, "plugin");
  ASSERT_NE(plugin, 0u);
  EXPECT_EQ(symbols->Symbolize(plugin), "[unknown]");
}

TEST_P(NativeSymbolizerTest, AddressOutsideEveryMappingIsUnknown) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  std::unique_ptr<NativeSymbolizer> owner = NewSymbolizer();
  NativeSymbolizer& symbolizer = *owner;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->Symbolize(8), "[unknown]");
  target->KillAndReap();
  EXPECT_EQ(symbols->Symbolize(8), "[unknown]");
}

TEST_P(NativeSymbolizerTest, MissingProcessIsNotFound) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  target->KillAndReap();
  std::unique_ptr<NativeSymbolizer> owner = NewSymbolizer();
  NativeSymbolizer& symbolizer = *owner;
  EXPECT_EQ(symbolizer.ForProcess(target->pid()).status().code(), absl::StatusCode::kNotFound);
}

// The binary lives on a tmpfs mounted only inside the target's mount
// namespace, so the symbolizer can reach it only through /proc/PID/root.
TEST_P(NativeSymbolizerTest, ReadsBinariesInsideOtherMountNamespaces) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create a mount namespace";
  char dir[] = "/tmp/pystrobe-mntns-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  auto target = TargetProcess::Start(
      {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
       "mount -t tmpfs pystrobe \"$0\" && cp \"$1\" \"$0\"/target && exec \"$0\"/target", dir,
       SYMBOLIZER_TARGET_PIE});
  if (target == nullptr) {
    rmdir(dir);
    GTEST_SKIP() << "cannot mount a tmpfs in a new mount namespace here";
  }
  std::string hidden_path = std::string(dir) + "/target";
  EXPECT_NE(access(hidden_path.c_str(), F_OK), 0) << "the binary must be invisible from here";

  std::unique_ptr<NativeSymbolizer> owner = NewSymbolizer();
  NativeSymbolizer& symbolizer = *owner;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->Symbolize(target->address("work")), "pystrobe_target_work");
  EXPECT_THAT(symbols->Symbolize(target->address("libc")), IsQsort());
  // Exit tears the namespace and its tmpfs down; the names stay.
  target->KillAndReap();
  EXPECT_EQ(symbols->Symbolize(target->address("work") + 1), "pystrobe_target_work");
  rmdir(dir);
}

double ForProcessMilliseconds(NativeSymbolizer& symbolizer, uint32_t pid) {
  auto start = std::chrono::steady_clock::now();
  auto symbols = symbolizer.ForProcess(pid);
  auto end = std::chrono::steady_clock::now();
  EXPECT_TRUE(symbols.ok()) << symbols.status();
  return std::chrono::duration<double, std::milli>(end - start).count();
}

// Names CPython's own functions, and reports what ForProcess costs for it and
// for a small C program (see the log; not asserted): BCC eager and lazy, and
// SharedModuleSymbolizer cold (first process of a binary) and warm (the next).
TEST(NativeSymbolizerCostTest, NamesPythonInterpreterFunctionsAndReportsCost) {
  if (access(SYMBOLIZER_PYTHON, X_OK) != 0) GTEST_SKIP() << SYMBOLIZER_PYTHON << " missing";
  auto python = TargetProcess::Start(
      {SYMBOLIZER_PYTHON, "-c",
       "import ctypes, sys\n"
       "print('eval=%#x' % ctypes.cast(ctypes.pythonapi.PyEval_EvalCode, ctypes.c_void_p).value)\n"
       "print('ready', flush=True)\n"
       "sys.stdin.read()\n"});
  ASSERT_NE(python, nullptr);
  auto c_program = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(c_program, nullptr);

  BccNativeSymbolizer eager;
  BccNativeSymbolizer lazy({.load_eagerly = false, .lazy_names = true});
  for (auto [name, pid] : {std::pair{"python3.11", python->pid()}, {"C", c_program->pid()}}) {
    // The first run warms the page cache; report the second.
    ForProcessMilliseconds(eager, pid);
    double eager_ms = ForProcessMilliseconds(eager, pid);
    double lazy_ms = ForProcessMilliseconds(lazy, pid);
    SharedModuleSymbolizer shared;
    double cold_ms = ForProcessMilliseconds(shared, pid);
    double warm_ms = ForProcessMilliseconds(shared, pid);
    constexpr int kRuns = 100;
    double warm_total_ms = 0;
    for (int i = 0; i < kRuns; ++i) warm_total_ms += ForProcessMilliseconds(shared, pid);
    std::cout << absl::StrFormat(
        "ForProcess(%s): BCC eager %.2f ms, BCC lazy %.2f ms; shared cold %.2f ms, warm %.3f ms "
        "(then %.3f ms mean of %d)\n",
        name, eager_ms, lazy_ms, cold_ms, warm_ms, warm_total_ms / kRuns, kRuns);
  }

  for (Implementation implementation : {Implementation::kSharedModule, Implementation::kBcc}) {
    std::unique_ptr<NativeSymbolizer> symbolizer = MakeSymbolizer(implementation);
    auto symbols = Snapshot(*symbolizer, python->pid());
    ASSERT_NE(symbols, nullptr);
    EXPECT_EQ(symbols->Symbolize(python->address("eval") + 1), "PyEval_EvalCode");
  }
  SharedModuleSymbolizer shared;
  auto symbols = Snapshot(shared, python->pid());
  ASSERT_NE(symbols, nullptr);
  python->KillAndReap();
  EXPECT_EQ(symbols->Symbolize(python->address("eval") + 1), "PyEval_EvalCode");
}

INSTANTIATE_TEST_SUITE_P(Implementations, NativeSymbolizerTest,
                         ::testing::Values(Implementation::kSharedModule, Implementation::kBcc),
                         [](const ::testing::TestParamInfo<Implementation>& info) {
                           return info.param == Implementation::kBcc ? "Bcc" : "SharedModule";
                         });

}  // namespace
}  // namespace pystrobe

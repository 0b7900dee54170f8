// Tests of BccNativeSymbolizer against real processes: the workloads in
// tests/workloads/symbolizer print addresses of their own functions and of
// libc, and the test checks the names that come back, also after exit.
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
#include "daemon/symbolizer/bcc_native_symbolizer.h"
#include "daemon/symbolizer/native_symbolizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::AnyOf;

// A child process that prints "key=0xaddress" lines, then "ready", then reads
// commands from stdin until EOF.
class TargetProcess {
 public:
  // Starts argv and reads its addresses; nullopt if it exits before "ready".
  static std::unique_ptr<TargetProcess> Start(const std::vector<std::string>& argv) {
    int to_child[2];
    int from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) return nullptr;
    pid_t pid = fork();
    if (pid < 0) return nullptr;
    if (pid == 0) {
      dup2(to_child[0], STDIN_FILENO);
      dup2(from_child[1], STDOUT_FILENO);
      std::vector<char*> args;
      for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    auto process = std::unique_ptr<TargetProcess>(
        new TargetProcess(pid, to_child[1], fdopen(from_child[0], "r")));
    for (std::optional<std::string> line; (line = process->ReadLine()) && *line != "ready";) {
      std::pair<std::string, std::string> kv = absl::StrSplit(*line, absl::MaxSplits('=', 1));
      uint64_t value = 0;
      if (absl::SimpleHexAtoi(kv.second, &value)) process->addresses_[kv.first] = value;
    }
    if (process->addresses_.empty()) return nullptr;
    return process;
  }

  ~TargetProcess() {
    close(stdin_fd_);
    fclose(stdout_);
    if (running_) KillAndReap();
  }

  uint32_t pid() const { return static_cast<uint32_t>(pid_); }
  uint64_t address(const std::string& key) const {
    auto it = addresses_.find(key);
    return it == addresses_.end() ? 0 : it->second;
  }

  // Sends one command and reads "key=0xaddress" back.
  uint64_t Request(const std::string& command, const std::string& key) {
    std::string line = command + "\n";
    if (write(stdin_fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return 0;
    std::optional<std::string> reply = ReadLine();
    std::string prefix = key + "=";
    uint64_t value = 0;
    if (!reply || reply->rfind(prefix, 0) != 0 ||
        !absl::SimpleHexAtoi(reply->substr(prefix.size()), &value)) {
      return 0;
    }
    return value;
  }

  // After this the pid is gone from /proc.
  void KillAndReap() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    running_ = false;
  }

 private:
  TargetProcess(pid_t pid, int stdin_fd, FILE* stdout_file)
      : pid_(pid), stdin_fd_(stdin_fd), stdout_(stdout_file) {}

  std::optional<std::string> ReadLine() {
    char* line = nullptr;
    size_t capacity = 0;
    ssize_t n = getline(&line, &capacity, stdout_);
    std::optional<std::string> result;
    if (n > 0) result = std::string(line, line[n - 1] == '\n' ? n - 1 : n);
    free(line);
    return result;
  }

  pid_t pid_;
  int stdin_fd_;
  FILE* stdout_;
  bool running_ = true;
  std::map<std::string, uint64_t> addresses_;
};

// With libc6-dbg installed the debug file adds glibc's internal alias at the
// same address, and which alias BCC returns is not specified.
auto IsQsort() { return AnyOf("qsort", "__GI_qsort"); }

std::unique_ptr<ProcessSymbols> Snapshot(NativeSymbolizer& symbolizer, uint32_t pid) {
  absl::StatusOr<std::unique_ptr<ProcessSymbols>> symbols = symbolizer.ForProcess(pid);
  EXPECT_TRUE(symbols.ok()) << symbols.status();
  return symbols.ok() ? *std::move(symbols) : nullptr;
}

TEST(NativeSymbolizerTest, NamesNonPieExecutableAndLibcFunctions) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_NOPIE});
  ASSERT_NE(target, nullptr);
  BccNativeSymbolizer symbolizer;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->Symbolize(target->address("work") + 1), "pystrobe_target_work");
  EXPECT_THAT(symbols->Symbolize(target->address("libc") + 1), IsQsort());
}

TEST(NativeSymbolizerTest, NamesPieExecutableAndLibcFunctions) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  BccNativeSymbolizer symbolizer;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->Symbolize(target->address("work")), "pystrobe_target_work");
  EXPECT_THAT(symbols->Symbolize(target->address("libc")), IsQsort());
}

TEST(NativeSymbolizerTest, DemanglesCxxNames) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_CXX});
  ASSERT_NE(target, nullptr);
  BccNativeSymbolizer symbolizer;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->Symbolize(target->address("work") + 2),
            "pystrobe::testing::Worker::Spin(int)");
}

TEST(NativeSymbolizerTest, FallsBackToModuleAndFileOffsetWithoutSymbols) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_STRIPPED});
  ASSERT_NE(target, nullptr);
  BccNativeSymbolizer symbolizer;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  // The PIE's text segment has equal file offsets and virtual addresses, so
  // the offset in the file is the offset from the load base.
  uint64_t work = target->address("work");
  EXPECT_EQ(symbols->Symbolize(work),
            absl::StrFormat("symbolizer_target_stripped+0x%x", work - target->address("base")));
  EXPECT_THAT(symbols->Symbolize(target->address("libc")), IsQsort());
}

TEST(NativeSymbolizerTest, FindsSymbolsThroughGnuDebuglinkEvenAfterExit) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_DEBUGLINK});
  ASSERT_NE(target, nullptr);
  BccNativeSymbolizer symbolizer;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  uint64_t work = target->address("work");
  EXPECT_EQ(symbols->Symbolize(work), "pystrobe_target_work");
  target->KillAndReap();
  EXPECT_EQ(symbols->Symbolize(work + 1), "pystrobe_target_work");
}

// The profiler names frames in batches, often after the process is gone.
TEST(NativeSymbolizerTest, NamesSurviveProcessExit) {
  for (const char* path : {SYMBOLIZER_TARGET_NOPIE, SYMBOLIZER_TARGET_PIE}) {
    SCOPED_TRACE(path);
    auto target = TargetProcess::Start({path});
    ASSERT_NE(target, nullptr);
    BccNativeSymbolizer symbolizer;
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
TEST(NativeSymbolizerTest, LazilyLoadedNamesSurviveProcessExit) {
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
TEST(NativeSymbolizerTest, NamesFunctionsOfDeletedExecutable) {
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

  BccNativeSymbolizer symbolizer;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  target->KillAndReap();
  EXPECT_EQ(symbols->Symbolize(target->address("work") + 1), "pystrobe_target_work");
  EXPECT_THAT(symbols->Symbolize(target->address("libc")), IsQsort());
}

TEST(NativeSymbolizerTest, RefreshesForLibrariesDlopenedAfterSnapshot) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  BccNativeSymbolizer symbolizer;
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

TEST(NativeSymbolizerTest, RefreshIsRateLimited) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  BccNativeSymbolizer symbolizer({.min_refresh_interval = absl::Hours(1)});
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  // Spends the one refresh allowed this hour on an address nothing maps.
  EXPECT_EQ(symbols->Symbolize(8), "[unknown]");
  uint64_t plugin = target->Request(std::string("dlopen ") + SYMBOLIZER_PLUGIN, "plugin");
  ASSERT_NE(plugin, 0u);
  EXPECT_EQ(symbols->Symbolize(plugin), "[unknown]");
}

TEST(NativeSymbolizerTest, AddressOutsideEveryMappingIsUnknown) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  BccNativeSymbolizer symbolizer;
  auto symbols = Snapshot(symbolizer, target->pid());
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->Symbolize(8), "[unknown]");
  target->KillAndReap();
  EXPECT_EQ(symbols->Symbolize(8), "[unknown]");
}

TEST(NativeSymbolizerTest, MissingProcessIsNotFound) {
  auto target = TargetProcess::Start({SYMBOLIZER_TARGET_PIE});
  ASSERT_NE(target, nullptr);
  target->KillAndReap();
  BccNativeSymbolizer symbolizer;
  EXPECT_EQ(symbolizer.ForProcess(target->pid()).status().code(), absl::StatusCode::kNotFound);
}

// The binary lives on a tmpfs mounted only inside the target's mount
// namespace, so the symbolizer can reach it only through /proc/PID/root.
TEST(NativeSymbolizerTest, ReadsBinariesInsideOtherMountNamespaces) {
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

  BccNativeSymbolizer symbolizer;
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
// for a small C program, eager and lazy (see the log; not asserted).
TEST(NativeSymbolizerTest, NamesPythonInterpreterFunctionsAndReportsCost) {
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
    std::cout << absl::StrFormat("ForProcess(%s): eager %.2f ms, lazy %.2f ms\n", name, eager_ms,
                                 lazy_ms);
  }

  auto symbols = Snapshot(eager, python->pid());
  ASSERT_NE(symbols, nullptr);
  python->KillAndReap();
  EXPECT_EQ(symbols->Symbolize(python->address("eval") + 1), "PyEval_EvalCode");
}

}  // namespace
}  // namespace pystrobe

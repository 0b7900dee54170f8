// The tracker against real processes and a fake store: what the kernel would
// be handed, and when tables come and go.
#include "daemon/recording/native_unwind_tracker.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace pystrobe {
namespace {

class FakeStore : public UnwindTableStore {
 public:
  absl::Status LoadTable(uint32_t id, const UnwindTable& table) override {
    loaded[id] = &table;
    ++loads;
    return absl::OkStatus();
  }
  void UnloadTable(uint32_t id) override { loaded.erase(id); }
  absl::Status SetProcessMappings(uint32_t pid,
                                  absl::Span<const pystrobe_unwind_mapping> mappings) override {
    processes[pid].assign(mappings.begin(), mappings.end());
    return absl::OkStatus();
  }
  void RemoveProcess(uint32_t pid) override { processes.erase(pid); }

  std::map<uint32_t, const UnwindTable*> loaded;
  std::map<uint32_t, std::vector<pystrobe_unwind_mapping>> processes;
  int loads = 0;
};

// The state letter of /proc/PID/stat ('S' asleep, 'R' running...), or 0.
char ProcessState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : 0;
}

std::string Executable(pid_t pid) {
  char exe[256] = {};
  if (readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof(exe) - 1) < 0) {
    return "";
  }
  return exe;
}

// A /bin/sleep, returned once it sleeps: its exec is done and the dynamic
// loader has mapped libc (it sleeps in libc's nanosleep). Waits for that state,
// never a fixed time, up to a liveness limit that judges no speed.
pid_t StartSleeper() {
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sleep", "sleep", "30", nullptr);
    _exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string exe;
  char state = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    // Until the exec has happened, the child is this test binary.
    exe = Executable(pid);
    state = ProcessState(pid);
    if (exe.find("sleep") != std::string::npos && state == 'S') return pid;
    usleep(1000);
  }
  ADD_FAILURE() << "waited 30 s for pid " << pid << " to sleep in /bin/sleep; last saw exe \""
                << exe << "\", state '" << state << "'";
  return pid;
}

void Stop(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(ParseExecutableRegionsTest, KeepsFilesVdsoAndAnonymousCodeOnly) {
  std::vector<ExecutableRegion> regions = ParseExecutableRegions(
      "55d0c0000000-55d0c0001000 r--p 00000000 08:01 12 /usr/bin/python3.11\n"
      "55d0c0001000-55d0c0200000 r-xp 00001000 08:01 12 /usr/bin/python3.11\n"
      "7f0000000000-7f0000001000 rwxp 00000000 00:00 0 \n"
      "7f0000010000-7f0000011000 r-xp 00002000 08:01 99 /tmp/lib.so (deleted)\n"
      "7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]\n"
      "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n");
  ASSERT_EQ(regions.size(), 4u);
  EXPECT_EQ(regions[0].path, "/usr/bin/python3.11");
  EXPECT_EQ(regions[0].file_offset, 0x1000u);
  EXPECT_TRUE(regions[1].anonymous());
  EXPECT_TRUE(regions[2].deleted);
  EXPECT_EQ(regions[2].path, "/tmp/lib.so");
  EXPECT_FALSE(regions[3].anonymous());
}

TEST(NativeUnwindTrackerTest, ProcessesShareTablesAndTheLastExitEvictsThem) {
  FakeStore store;
  NativeUnwindTracker tracker(&store);
  pid_t first = StartSleeper(), second = StartSleeper();
  ASSERT_TRUE(tracker.Track(first).ok());
  const std::vector<pystrobe_unwind_mapping>& mappings = store.processes[first];
  ASSERT_GE(mappings.size(), 3u);  // sleep, libc, ld.so, the vDSO
  EXPECT_TRUE(std::is_sorted(mappings.begin(), mappings.end(),
                             [](const auto& a, const auto& b) { return a.start < b.start; }));
  size_t with_tables = std::count_if(mappings.begin(), mappings.end(), [](const auto& m) {
    return m.table_id != PYSTROBE_UNWIND_TABLE_NONE && m.table_id != PYSTROBE_UNWIND_TABLE_JIT;
  });
  EXPECT_EQ(with_tables, mappings.size());
  // Every mapping's bias turns its start into an address its table covers.
  for (const pystrobe_unwind_mapping& m : mappings) {
    const UnwindTable* table = store.loaded.at(m.table_id);
    bool covered = false;
    for (uint64_t pc = m.start; pc < m.end && !covered; pc += 64) {
      const pystrobe_unwind_row* row = table->Find(pc - m.bias);
      covered = row != nullptr && row->cfa_rule != PYSTROBE_UNWIND_CFA_INVALID;
    }
    EXPECT_TRUE(covered) << std::hex << m.start << "-" << m.end;
  }
  int loads = store.loads;
  ASSERT_TRUE(tracker.Track(second).ok());
  EXPECT_EQ(store.loads, loads) << "the second sleep's binaries were all known";
  tracker.Forget(first);
  EXPECT_EQ(store.loaded.size(), static_cast<size_t>(loads)) << "still mapped by the second";
  tracker.Forget(second);
  EXPECT_TRUE(store.loaded.empty());
  EXPECT_TRUE(store.processes.empty());
  Stop(first);
  Stop(second);
}

TEST(NativeUnwindTrackerTest, PythonOnlyTrackerIgnoresOtherProcessesSamples) {
  FakeStore store;
  NativeUnwindTracker tracker(&store, "/proc", /*python_only=*/true);
  pid_t pid = StartSleeper();
  pystrobe_sample sample{};
  sample.kind = PYSTROBE_EVENT_SAMPLE;
  sample.pid = static_cast<uint32_t>(pid);
  sample.python_status = PYSTROBE_PY_NOT_PYTHON;
  auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&sample),
                                        offsetof(pystrobe_sample, data));
  tracker.OnRecord(bytes);
  EXPECT_TRUE(store.processes.empty());
  sample.python_status = PYSTROBE_PY_WALKED;
  tracker.OnRecord(bytes);
  EXPECT_EQ(store.processes.count(pid), 1u);
  Stop(pid);
}

}  // namespace
}  // namespace pystrobe

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
#include <utility>

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
  void UnloadTable(uint32_t id) override {
    if (loaded.erase(id)) ++unloads;
    unavailable.erase(id);
  }
  void MarkUnavailable(uint32_t id) override {
    loaded.erase(id);
    unavailable.insert(id);
  }
  std::vector<uint32_t> TakeWantedTables() override { return std::exchange(wanted, {}); }
  uint64_t LastUsedNs(uint32_t id) override { return used_ns[id]; }
  absl::Status SetProcessMappings(uint32_t pid,
                                  absl::Span<const pystrobe_unwind_mapping> mappings) override {
    processes[pid].assign(mappings.begin(), mappings.end());
    return absl::OkStatus();
  }
  void RemoveProcess(uint32_t pid) override { processes.erase(pid); }

  std::map<uint32_t, const UnwindTable*> loaded;
  std::set<uint32_t> unavailable;
  std::map<uint32_t, std::vector<pystrobe_unwind_mapping>> processes;
  std::vector<uint32_t> wanted;
  std::map<uint32_t, uint64_t> used_ns;
  // With a budget: tables past it do not fit (rows counted).
  size_t budget_rows = SIZE_MAX;
  int loads = 0;
  int unloads = 0;
};

// The store above with room for `budget_rows` rows in all.
class BudgetStore : public FakeStore {
 public:
  absl::Status LoadTable(uint32_t id, const UnwindTable& table) override {
    size_t rows = table.rows.size();
    for (const auto& [other, t] : loaded) rows += other == id ? 0 : t->rows.size();
    if (rows > budget_rows) return absl::ResourceExhaustedError("no room");
    return FakeStore::LoadTable(id, table);
  }
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

// A sample whose walk asked for tables (or not).
// A record of `kind` about `pid`, as the kernel writes it and the session's
// decoder hands it on.
RingRecord SampleOf(pid_t pid, uint32_t flags = 0, uint16_t python_status = PYSTROBE_PY_NOT_PYTHON,
                    uint32_t kind = PYSTROBE_EVENT_SAMPLE) {
  pystrobe_sample sample{};
  sample.kind = kind;
  sample.pid = static_cast<uint32_t>(pid);
  sample.flags = flags;
  sample.python_status = python_status;
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(&sample);
  absl::StatusOr<RingRecord> record =
      DecodeRingRecord(std::span(bytes, offsetof(pystrobe_sample, data)));
  EXPECT_TRUE(record.ok()) << record.status();
  return record.ok() ? *record : RingRecord{};
}

RingRecord ProcessEventOf(pid_t pid, uint32_t kind) {
  pystrobe_process_event event{};
  event.kind = kind;
  event.pid = static_cast<uint32_t>(pid);
  absl::StatusOr<RingRecord> record =
      DecodeRingRecord(std::span(reinterpret_cast<const uint8_t*>(&event), sizeof(event)));
  EXPECT_TRUE(record.ok()) << record.status();
  return record.ok() ? *record : RingRecord{};
}

// The table id of the mapping that holds the file named `name`, or NONE.
uint32_t TableOf(const FakeStore& store, pid_t pid, const std::string& maps_path,
                 const std::string& name) {
  std::ifstream in(maps_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(name) == std::string::npos || line.find("r-xp") == std::string::npos) continue;
    uint64_t start = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
    for (const pystrobe_unwind_mapping& m : store.processes.at(pid)) {
      if (m.start == start) return m.table_id;
    }
  }
  return PYSTROBE_UNWIND_TABLE_NONE;
}

TEST(NativeUnwindTrackerTest, ProcessesShareTablesAndTheLastExitEvictsThem) {
  FakeStore store;
  NativeUnwindTracker tracker(&store);
  pid_t first = StartSleeper(), second = StartSleeper();
  ASSERT_TRUE(tracker.Track(first).ok());
  // The executable's and libc's tables come at once (every stack starts
  // there); the rest when a walk asks. Here: all of them.
  tracker.Settle(absl::Seconds(30));
  for (const pystrobe_unwind_mapping& m : store.processes[first])
    store.wanted.push_back(m.table_id);
  tracker.Service(/*asked=*/true);
  tracker.Settle(absl::Seconds(30));
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
  NativeUnwindTrackerOptions options;
  options.python_only = true;
  NativeUnwindTracker tracker(&store, std::move(options));
  pid_t pid = StartSleeper();
  tracker.OnRecord(SampleOf(pid, 0, PYSTROBE_PY_NOT_PYTHON));
  EXPECT_TRUE(store.processes.empty());
  tracker.OnRecord(SampleOf(pid, 0, PYSTROBE_PY_WALKED));
  EXPECT_EQ(store.processes.count(pid), 1u);
  Stop(pid);
}

TEST(NativeUnwindTrackerTest, OnlyWalkedSamplesAndProcessEventsMoveTheTracker) {
  FakeStore store;
  NativeUnwindTracker tracker(&store);
  pid_t pid = StartSleeper();
  // Stacks the kernel walks without tables, and records that are no stack,
  // read no mappings.
  for (uint32_t kind : {PYSTROBE_EVENT_MEMORY, PYSTROBE_EVENT_ALLOC, PYSTROBE_EVENT_OOM_KILLED}) {
    tracker.OnRecord(SampleOf(pid, 0, PYSTROBE_PY_WALKED, kind));
  }
  tracker.OnRecord(FreeRecord{.pid = static_cast<uint32_t>(pid), .address = 0x1000});
  tracker.OnRecord(FinalizeRecord{.pid = static_cast<uint32_t>(pid)});
  EXPECT_TRUE(store.processes.empty());
  // An off-CPU stack is walked as a cpu-clock one is.
  tracker.OnRecord(SampleOf(pid, 0, PYSTROBE_PY_WALKED, PYSTROBE_EVENT_OFFCPU));
  EXPECT_EQ(store.processes.count(pid), 1u);
  tracker.OnRecord(ProcessEventOf(pid, PYSTROBE_EVENT_EXIT));
  EXPECT_TRUE(store.processes.empty());
  // An exec reads the new image's mappings at once...
  tracker.OnRecord(ProcessEventOf(pid, PYSTROBE_EVENT_EXEC));
  EXPECT_EQ(store.processes.count(pid), 1u);
  EXPECT_EQ(tracker.stats().processes, 1u);
  Stop(pid);
}

TEST(NativeUnwindTrackerTest, PythonOnlyTrackerLeavesAnExecToItsFirstSample) {
  FakeStore store;
  NativeUnwindTrackerOptions options;
  options.python_only = true;
  NativeUnwindTracker tracker(&store, std::move(options));
  pid_t pid = StartSleeper();
  tracker.OnRecord(SampleOf(pid, 0, PYSTROBE_PY_WALKED));
  ASSERT_EQ(store.processes.count(pid), 1u);
  // ... unless only CPython is walked: the new image may be none.
  tracker.OnRecord(ProcessEventOf(pid, PYSTROBE_EVENT_EXEC));
  EXPECT_TRUE(store.processes.empty());
  tracker.OnRecord(SampleOf(pid, 0, PYSTROBE_PY_NOT_PYTHON));
  EXPECT_TRUE(store.processes.empty());
  Stop(pid);
}

TEST(NativeUnwindTrackerTest, OnlyTablesWalksAskForAreBuiltAndLoaded) {
  FakeStore store;
  NativeUnwindTracker tracker(&store);
  pid_t pid = StartSleeper();
  tracker.OnRecord(SampleOf(pid));
  tracker.Settle(absl::Seconds(30));
  std::string maps = "/proc/" + std::to_string(pid) + "/maps";
  uint32_t sleep = TableOf(store, pid, maps, "/sleep");
  uint32_t libc = TableOf(store, pid, maps, "libc.so");
  uint32_t vdso = TableOf(store, pid, maps, "[vdso]");
  ASSERT_NE(sleep, PYSTROBE_UNWIND_TABLE_NONE);
  ASSERT_NE(libc, PYSTROBE_UNWIND_TABLE_NONE);
  ASSERT_NE(vdso, PYSTROBE_UNWIND_TABLE_NONE);
  // Every stack starts in the executable and libc: theirs come at once.
  EXPECT_TRUE(store.loaded.count(sleep));
  EXPECT_TRUE(store.loaded.count(libc));
  // The vDSO: mapped, not walked through yet, not built.
  EXPECT_FALSE(store.loaded.count(vdso));
  // A walk asks for the vDSO's table: it comes.
  store.wanted = {vdso};
  tracker.OnRecord(SampleOf(pid, PYSTROBE_SAMPLE_NATIVE_TABLE_WANTED));
  tracker.Settle(absl::Seconds(30));
  EXPECT_TRUE(store.loaded.count(vdso));
  EXPECT_EQ(tracker.builder_stats().failed, 0u);
  Stop(pid);
}

TEST(NativeUnwindTrackerTest, FullBudgetEvictsTheLeastRecentlyWalkedTable) {
  BudgetStore store;
  NativeUnwindTracker tracker(&store);
  pid_t pid = StartSleeper();
  tracker.OnRecord(SampleOf(pid));
  tracker.Settle(absl::Seconds(30));
  std::string maps = "/proc/" + std::to_string(pid) + "/maps";
  uint32_t sleep = TableOf(store, pid, maps, "/sleep");
  uint32_t libc = TableOf(store, pid, maps, "libc.so");
  uint32_t loader = TableOf(store, pid, maps, "ld-linux");
  uint32_t vdso = TableOf(store, pid, maps, "[vdso]");
  ASSERT_TRUE(store.loaded.count(sleep) && store.loaded.count(libc) && store.loaded.count(loader));
  size_t rows = 0;
  for (const auto& [id, table] : store.loaded) rows += table->rows.size();
  // No room for the vDSO's few rows until sleep's table (walked longest
  // ago) goes; libc's, walked just now, stays.
  store.budget_rows = rows - 1;
  store.used_ns = {{sleep, 100}, {libc, 300}, {loader, 200}};
  store.wanted = {vdso};
  tracker.OnRecord(SampleOf(pid, PYSTROBE_SAMPLE_NATIVE_TABLE_WANTED));
  tracker.Settle(absl::Seconds(30));
  EXPECT_TRUE(store.loaded.count(vdso));
  EXPECT_FALSE(store.loaded.count(sleep)) << "walked longest ago";
  EXPECT_TRUE(store.loaded.count(libc)) << "walked last";
  EXPECT_EQ(tracker.stats().tables_evicted, 1u);
  // Asked for again, sleep's table comes back from memory (nothing is
  // built again), in place of what is oldest now.
  store.used_ns = {{vdso, 400}, {libc, 50}, {loader, 350}};
  store.wanted = {sleep};
  uint64_t built = tracker.builder_stats().built;
  tracker.OnRecord(SampleOf(pid, PYSTROBE_SAMPLE_NATIVE_TABLE_WANTED));
  EXPECT_TRUE(store.loaded.count(sleep));
  EXPECT_FALSE(store.loaded.count(libc));
  EXPECT_EQ(tracker.builder_stats().built, built);
  Stop(pid);
}

TEST(NativeUnwindTrackerTest, TableLargerThanTheWholeBudgetIsUnavailable) {
  BudgetStore store;
  store.budget_rows = 10;
  NativeUnwindTracker tracker(&store);
  pid_t pid = StartSleeper();
  tracker.OnRecord(SampleOf(pid));
  tracker.Settle(absl::Seconds(30));
  std::string maps = "/proc/" + std::to_string(pid) + "/maps";
  uint32_t libc = TableOf(store, pid, maps, "libc.so");
  EXPECT_TRUE(store.unavailable.count(libc));
  EXPECT_GE(tracker.stats().tables_unavailable, 1u);
  Stop(pid);
}

}  // namespace
}  // namespace pystrobe

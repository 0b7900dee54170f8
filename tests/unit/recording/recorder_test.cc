// The path from ring buffer records to a symbolized profile, with a fake
// native symbolizer standing in for BCC.
#include "daemon/recording/recorder.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/recording/profile_builder.h"
#include "daemon/recording/time_weighting.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

// Names address A of any process "fn_<hex A>_in_<pid>#<snapshot>", so a test can
// tell which snapshot (process image) named a frame.
class FakeSymbolizer : public NativeSymbolizer {
 public:
  class Symbols : public ProcessSymbols {
   public:
    Symbols(uint32_t pid, int snapshot) : pid_(pid), snapshot_(snapshot) {}
    std::string Symbolize(uint64_t addr) override {
      return absl::StrCat("fn_", absl::Hex(addr), "_in_", pid_, "#", snapshot_);
    }

   private:
    uint32_t pid_;
    int snapshot_;
  };

  absl::StatusOr<std::unique_ptr<ProcessSymbols>> ForProcess(uint32_t pid) override {
    if (pid == kGonePid) return absl::NotFoundError("gone");
    return std::make_unique<Symbols>(pid, ++snapshots_);
  }

  static constexpr uint32_t kGonePid = 999;
  int snapshots_ = 0;
};

// Process names come from the samples alone, not from this machine's /proc.
std::string NoProcComm(uint32_t) { return ""; }

std::vector<uint8_t> SampleRecord(uint32_t pid, uint32_t tid, const char* comm,
                                  std::vector<uint64_t> kernel, std::vector<uint64_t> user) {
  pystrobe_sample sample = {};
  sample.kind = PYSTROBE_EVENT_SAMPLE;
  sample.pid = pid;
  sample.tid = tid;
  std::memcpy(sample.comm, comm, std::min(sizeof(sample.comm), std::strlen(comm)));
  sample.kernel_frames = kernel.size();
  sample.user_frames = user.size();
  std::copy(kernel.begin(), kernel.end(), sample.data);
  std::copy(user.begin(), user.end(), sample.data + kernel.size());
  size_t size = offsetof(pystrobe_sample, data) + 8 * (kernel.size() + user.size());
  const auto* bytes = reinterpret_cast<const uint8_t*>(&sample);
  return std::vector<uint8_t>(bytes, bytes + size);
}

std::vector<uint8_t> OffCpuRecord(uint32_t pid, uint32_t tid, const char* comm,
                                  std::vector<uint64_t> user, uint32_t reason, uint64_t ns) {
  std::vector<uint8_t> record = SampleRecord(pid, tid, comm, {}, std::move(user));
  auto* sample = reinterpret_cast<pystrobe_sample*>(record.data());
  sample->kind = PYSTROBE_EVENT_OFFCPU;
  sample->offcpu_reason = reason;
  sample->weight_ns = ns;
  return record;
}

std::vector<uint8_t> ProcessEvent(uint32_t kind, uint32_t pid, const char* comm) {
  pystrobe_process_event event = {};
  event.kind = kind;
  event.pid = pid;
  std::memcpy(event.comm, comm, std::min(sizeof(event.comm), std::strlen(comm)));
  const auto* bytes = reinterpret_cast<const uint8_t*>(&event);
  return std::vector<uint8_t>(bytes, bytes + sizeof(event));
}

std::map<std::string, uint64_t> Folded(Recorder& recorder, const KernelSymbolizer* kernel,
                                       bool threads = false) {
  Profile profile;
  ProfileBuilder builder(&recorder.processes(), &recorder.python_codes(), &recorder.native_names(),
                         kernel, ProfileBuilderOptions{.threads = threads});
  builder.AddTo(recorder.stacks(), profile);
  std::map<std::string, uint64_t> folded;
  for (const ProfileStack& stack : profile.stacks()) {
    std::vector<std::string> names;
    for (const Frame& frame : stack.frames) names.push_back(frame.name);
    folded[absl::StrJoin(names, ";")] += stack.count;
  }
  return folded;
}

TEST(RecorderTest, SameStackIsCountedOnceWithItsSamples) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  for (int i = 0; i < 3; ++i) recorder.HandleRecord(SampleRecord(1, 1, "worker", {}, {0x10, 0x20}));
  recorder.HandleRecord(SampleRecord(1, 1, "worker", {}, {0x30, 0x20}));
  EXPECT_EQ(recorder.samples(), 4u);
  // Root first: the outermost caller (last user ip) comes right after the
  // process; caller frames are looked up at the return address minus one.
  EXPECT_THAT(Folded(recorder, nullptr),
              UnorderedElementsAre(Pair("worker (1);fn_1f_in_1#1;fn_10_in_1#1", 3),
                                   Pair("worker (1);fn_1f_in_1#1;fn_30_in_1#1", 1)));
}

TEST(RecorderTest, KernelFramesSitAboveUserFrames) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  absl::StatusOr<KernelSymbolizer> kernel = KernelSymbolizer::FromText(
      "ffffffff81000000 T do_syscall_64\nffffffff81001000 T ksys_read\n"
      "ffffffff81002000 T end_of_text\n");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  recorder.HandleRecord(
      SampleRecord(7, 7, "reader", {0xffffffff81001010, 0xffffffff81000020}, {0x40}));
  EXPECT_THAT(
      Folded(recorder, &*kernel),
      UnorderedElementsAre(Pair("reader (7);fn_40_in_7#1;do_syscall_64_[k];ksys_read_[k]", 1)));
}

TEST(RecorderTest, ExecStartsANewImageWithItsOwnSymbolsAndName) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  recorder.HandleRecord(SampleRecord(5, 5, "bash", {}, {0x100}));
  recorder.HandleRecord(ProcessEvent(PYSTROBE_EVENT_EXEC, 5, "python3"));
  recorder.HandleRecord(SampleRecord(5, 5, "python3", {}, {0x100}));
  EXPECT_THAT(Folded(recorder, nullptr),
              UnorderedElementsAre(Pair("bash (5);fn_100_in_5#1", 1),
                                   Pair("python3 (5);fn_100_in_5#2", 1)));
}

TEST(RecorderTest, ReusedPidAfterExitNeverInheritsOldSymbols) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  recorder.HandleRecord(SampleRecord(8, 8, "old", {}, {0x1}));
  recorder.HandleRecord(ProcessEvent(PYSTROBE_EVENT_EXIT, 8, "old"));
  recorder.HandleRecord(SampleRecord(8, 8, "new", {}, {0x1}));
  EXPECT_EQ(recorder.processes().image_count(), 2u);
  EXPECT_THAT(Folded(recorder, nullptr),
              UnorderedElementsAre(Pair("old (8);fn_1_in_8#1", 1), Pair("new (8);fn_1_in_8#2", 1)));
}

// Counts the lookups; finds no CPython.
class CountingDiscovery : public PythonDiscovery {
 public:
  absl::StatusOr<std::unique_ptr<PythonProcess>> Discover(uint32_t) override {
    ++calls;
    return absl::NotFoundError("no CPython");
  }
  int calls = 0;
};

TEST(ProcessTableTest, ATrackedProcessIsLookedAtBeforeItsFirstSampleAndKeepsItsImage) {
  FakeSymbolizer symbolizer;
  CountingDiscovery discovery;
  ProcessTable table(&symbolizer, &discovery, [](uint32_t) { return std::string("python3"); });
  std::optional<ImageId> tracked = table.Track(5);
  ASSERT_TRUE(tracked.has_value());
  EXPECT_EQ(discovery.calls, 1);
  EXPECT_EQ(symbolizer.snapshots_, 1);
  EXPECT_EQ(table.image(*tracked).comm, "python3");
  EXPECT_EQ(table.OnSample(5, 6, "worker"), tracked);
  EXPECT_EQ(table.image_count(), 1u);
  EXPECT_EQ(symbolizer.snapshots_, 1);
}

// Answers each lookup with the next of `answers`, then NotFound.
class ScriptedDiscovery : public PythonDiscovery {
 public:
  explicit ScriptedDiscovery(std::vector<absl::Status> answers) : answers_(std::move(answers)) {}
  absl::StatusOr<std::unique_ptr<PythonProcess>> Discover(uint32_t) override {
    const size_t call = calls_++;
    return call < answers_.size() ? answers_[call] : absl::NotFoundError("no CPython");
  }
  size_t calls() const { return calls_; }

 private:
  std::vector<absl::Status> answers_;
  size_t calls_ = 0;
};

// A process is looked at again, 10 ms after its first look, unless that look
// said it never will be read.
TEST(ProcessTableTest, OnlyAVersionOrMemoryBeyondReachEndsTheLookingForPython) {
  const std::vector<std::pair<absl::Status, size_t>> cases = {
      {absl::NotFoundError("no CPython yet"), 2},
      {absl::UnavailableError("libpython still being loaded"), 2},
      {absl::OutOfRangeError("process 7: a read faulted as the loader mapped it"), 2},
      {absl::InternalError("process_vm_readv: errno 12"), 2},
      {absl::UnimplementedError("CPython 3.5"), 1},
      {absl::PermissionDeniedError("ptrace access mode"), 1},
  };
  for (const auto& [first, looks] : cases) {
    SCOPED_TRACE(first.ToString());
    FakeSymbolizer symbolizer;
    ScriptedDiscovery discovery({first});
    ProcessTable table(&symbolizer, &discovery, NoProcComm);
    table.OnSample(7, 7, "python3");
    EXPECT_EQ(discovery.calls(), 1u);
    // The first retry is due 10 ms after the first look.
    std::this_thread::sleep_for(std::chrono::milliseconds(12));
    table.OnSample(7, 7, "python3");
    EXPECT_EQ(discovery.calls(), looks);
    // Those given up on are said, with why; the others may yet be found.
    ASSERT_EQ(table.python_not_read_count(), looks == 1 ? 1u : 0u);
    if (looks == 1) {
      EXPECT_EQ(table.python_not_read()[0].pid, 7u);
      EXPECT_EQ(table.python_not_read()[0].comm, "python3");
      EXPECT_EQ(table.python_not_read()[0].why, first);
    }
  }
}

TEST(RecorderTest, ExitedProcessKeepsItsNamesAfterItsSymbolsAreReleased) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  recorder.HandleRecord(SampleRecord(9, 9, "brief", {}, {0x50, 0x61}));
  recorder.HandleRecord(ProcessEvent(PYSTROBE_EVENT_EXIT, 9, "brief"));
  EXPECT_EQ(recorder.processes().image(0).symbols, nullptr);
  EXPECT_THAT(Folded(recorder, nullptr),
              UnorderedElementsAre(Pair("brief (9);fn_60_in_9#1;fn_50_in_9#1", 1)));
}

// An on-CPU sample that the kernel took `interval_ns` after the previous tick
// on its CPU.
std::vector<uint8_t> TimedSampleRecord(uint32_t pid, const char* comm, std::vector<uint64_t> user,
                                       uint64_t interval_ns) {
  std::vector<uint8_t> record = SampleRecord(pid, pid, comm, {}, std::move(user));
  reinterpret_cast<pystrobe_sample*>(record.data())->weight_ns = interval_ns;
  return record;
}

TEST(RecorderTest, EachOnCpuSampleWeighsTheIntervalBeforeIt) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {.mean_period_ns = 10'000'000}, NoProcComm);
  recorder.HandleRecord(TimedSampleRecord(4, "svc", {0x10}, 6'000'000));
  recorder.HandleRecord(TimedSampleRecord(4, "svc", {0x10}, 14'000'000));
  // The first tick on a CPU has no interval; one over two mean periods
  // spans ticks that did not come (an idle CPU's stopped timer): both weigh
  // the mean period.
  recorder.HandleRecord(TimedSampleRecord(4, "svc", {0x20}, 0));
  recorder.HandleRecord(TimedSampleRecord(4, "svc", {0x20}, 25'000'000));
  EXPECT_EQ(recorder.samples(), 4u);
  EXPECT_EQ(recorder.stacks().total_nanoseconds(), 40'000'000u);

  Profile profile;
  ProfileBuilder builder(&recorder.processes(), &recorder.python_codes(), &recorder.native_names(),
                         nullptr, {});
  builder.AddTo(recorder.stacks(), profile);
  ASSERT_EQ(profile.stacks().size(), 2u);
  for (const ProfileStack& stack : profile.stacks()) {
    EXPECT_EQ(stack.count, 2u);
    EXPECT_EQ(stack.nanoseconds, 20'000'000u);
  }
}

TEST(StackAggregatorTest, SinceGivesWhatEachStackGained) {
  RawStack a, b, c;
  a.image = 1;
  b.image = 2;
  c.image = 3;
  StackAggregator earlier;
  earlier.Add(a, {2, 20});
  earlier.Add(b, {1, 10});
  StackAggregator now = earlier;
  now.Add(a, {3, 33});
  now.Add(c, {1, 7});
  StackAggregator gained = now.Since(earlier);
  EXPECT_EQ(gained.size(), 2u);  // b gained nothing
  EXPECT_EQ(gained.weights().at(a), (StackWeight{3, 33}));
  EXPECT_EQ(gained.weights().at(c), (StackWeight{1, 7}));
  EXPECT_EQ(gained.total(), 4u);
  EXPECT_EQ(gained.total_nanoseconds(), 40u);
}

TEST(RecorderTest, OffCpuTimeIsWeighedByDurationAndEndsInItsReason) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  recorder.HandleRecord(TimedSampleRecord(4, "svc", {0x10}, 7'000'000));
  recorder.HandleRecord(OffCpuRecord(4, 4, "svc", {0x20}, PYSTROBE_OFFCPU_IO, 3'000'000));
  recorder.HandleRecord(OffCpuRecord(4, 4, "svc", {0x20}, PYSTROBE_OFFCPU_IO, 1'000'000));
  recorder.HandleRecord(OffCpuRecord(4, 4, "svc", {0x20}, PYSTROBE_OFFCPU_SLEEP, 2'000'000));
  EXPECT_EQ(recorder.samples(), 1u);
  EXPECT_EQ(recorder.offcpu_stacks().total(), 3u);
  EXPECT_EQ(recorder.offcpu_stacks().total_nanoseconds(), 6'000'000u);

  Profile profile;
  ProfileBuilder builder(&recorder.processes(), &recorder.python_codes(), &recorder.native_names(),
                         nullptr, {});
  // As with --off-cpu: the on-CPU sample weighs its 7 ms interval, counts are
  // microseconds.
  AddOnAndOffCpuStacks(recorder.stacks(), recorder.offcpu_stacks(),
                       {.offcpu = true, .rate_hz = 100}, builder, profile);
  EXPECT_EQ(profile.count_unit, "microseconds");
  std::map<std::string, uint64_t> folded;
  for (const ProfileStack& stack : profile.stacks()) {
    std::vector<std::string> names;
    for (const Frame& frame : stack.frames) names.push_back(frame.name);
    folded[absl::StrJoin(names, ";")] += stack.count;
  }
  EXPECT_THAT(folded, UnorderedElementsAre(Pair("[on-cpu];svc (4);fn_10_in_4#1", 7000),
                                           Pair("[off-cpu];svc (4);fn_20_in_4#1;[io wait]", 4000),
                                           Pair("[off-cpu];svc (4);fn_20_in_4#1;[sleep]", 2000)));
}

TEST(RecorderTest, ThreadsGetTheirOwnFramesWhenAsked) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, RecorderOptions{.threads = true}, NoProcComm);
  recorder.HandleRecord(SampleRecord(3, 3, "main", {}, {0x1}));
  recorder.HandleRecord(SampleRecord(3, 4, "loader", {}, {0x1}));
  auto folded = Folded(recorder, nullptr, /*threads=*/true);
  EXPECT_EQ(folded.size(), 2u);
  EXPECT_EQ(folded.at("main (3);loader tid=4;fn_1_in_3#1"), 1u);
  EXPECT_EQ(folded.at("main (3);main tid=3;fn_1_in_3#1"), 1u);
}

TEST(RecorderTest, AThreadInASubinterpreterSaysWhichWhenThreadsAreShown) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, RecorderOptions{.threads = true}, NoProcComm);
  std::vector<uint8_t> record = SampleRecord(3, 5, "worker", {}, {0x1});
  reinterpret_cast<pystrobe_sample*>(record.data())->interpreter_id = 2;
  recorder.HandleRecord(SampleRecord(3, 3, "main", {}, {0x1}));
  recorder.HandleRecord(record);
  EXPECT_THAT(Folded(recorder, nullptr, /*threads=*/true),
              UnorderedElementsAre(Pair("main (3);worker [interpreter 2] tid=5;fn_1_in_3#1", 1),
                                   Pair("main (3);main tid=3;fn_1_in_3#1", 1)));

  // Without threads, a sub-interpreter's samples add up with the others'.
  Recorder together(&symbolizer, nullptr, {}, NoProcComm);
  together.HandleRecord(record);
  together.HandleRecord(SampleRecord(3, 3, "main", {}, {0x1}));
  EXPECT_EQ(together.stacks().size(), 1u);
}

// Places addresses below 0x10000 in one library, at file offset = address
// + 0x1000; others in no mapping.
class LocatingSymbolizer : public NativeSymbolizer {
 public:
  class Symbols : public ProcessSymbols {
   public:
    std::string Symbolize(uint64_t addr) override { return Resolve(addr).name; }
    NativeFrameSymbol Resolve(uint64_t addr) override {
      if (addr >= 0x10000) return {"[unknown]", std::nullopt};
      NativeCodeLocation location;
      location.path = path_;
      location.build_id = build_id_;
      location.code_segments = segments_;
      location.file_offset = addr + 0x1000;
      return {absl::StrCat("fn_", absl::Hex(addr)), location};
    }

   private:
    std::string path_ = "/usr/lib/libfake.so.1";
    std::string build_id_ = "0123abcd";
    std::vector<CodeSegment> segments_ = {
        {.vaddr = 0x1000, .size = 0x10000, .file_offset = 0x1000}};
  };

  absl::StatusOr<std::unique_ptr<ProcessSymbols>> ForProcess(uint32_t) override {
    return std::make_unique<Symbols>();
  }
};

// The file a native frame came from is taken when it is named, and is one
// shared record per file, kept by the profile after the processes exit.
TEST(RecorderTest, NativeFramesCarryTheirModuleSharedByEveryProcess) {
  LocatingSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  recorder.HandleRecord(SampleRecord(1, 1, "a", {0xffffffff81000010}, {0x10, 0x21, 0x20000}));
  recorder.HandleRecord(SampleRecord(2, 2, "b", {}, {0x10}));
  recorder.HandleRecord(ProcessEvent(PYSTROBE_EVENT_EXIT, 1, "a"));
  recorder.HandleRecord(ProcessEvent(PYSTROBE_EVENT_EXIT, 2, "b"));
  EXPECT_EQ(recorder.native_names().module_count(), 1u);

  Profile profile;
  ProfileBuilder builder(&recorder.processes(), &recorder.python_codes(), &recorder.native_names(),
                         nullptr, {});
  builder.AddTo(recorder.stacks(), profile);
  std::shared_ptr<const NativeModule> module;
  size_t native_frames = 0;
  for (const ProfileStack& stack : profile.stacks()) {
    for (const Frame& frame : stack.frames) {
      SCOPED_TRACE(frame.name);
      if (frame.kind == FrameKind::kKernel) {
        ASSERT_NE(frame.module, nullptr);
        EXPECT_EQ(frame.module->path, "[kernel]");
      }
      if (frame.kind != FrameKind::kNative) continue;
      ++native_frames;
      if (frame.name == "[unknown]") {
        EXPECT_EQ(frame.module, nullptr);
        continue;
      }
      ASSERT_NE(frame.module, nullptr);
      if (module == nullptr) module = frame.module;
      EXPECT_EQ(frame.module, module) << "one record per file";
      EXPECT_EQ(frame.module->path, "/usr/lib/libfake.so.1");
      EXPECT_EQ(frame.module->build_id, "0123abcd");
      EXPECT_THAT(frame.module->code_segments,
                  ElementsAre(NativeModule::Segment{0x1000, 0x10000, 0x1000}));
      // Callers are looked up at the return address minus one.
      EXPECT_EQ(frame.file_offset, (frame.name == "fn_10" ? 0x10 : 0x20) + 0x1000u);
    }
  }
  EXPECT_EQ(native_frames, 4u);

  // The profile keeps the record alive after the names are gone.
  recorder.native_names().Forget(0);
  recorder.native_names().Forget(1);
  EXPECT_EQ(module->path, "/usr/lib/libfake.so.1");
}

// A frame-pointer walk through code without frame pointers: two true frames,
// then an address no mapping holds, then garbage that happens to land in one.
TEST(RecorderTest, NativeStackEndsInOneUnknownRootWhereItLeftEveryMapping) {
  LocatingSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  recorder.HandleRecord(
      SampleRecord(1, 1, "a", {}, {0x10, 0x21, 0x20000, 0x31, 0x30000, 0x41, 0x51}));
  EXPECT_THAT(Folded(recorder, nullptr),
              UnorderedElementsAre(Pair("a (1);[unknown];fn_20;fn_10", 1)));
}

// One file per address, as a host whose processes come and go with new
// libraries: records nobody holds any more leave the module table.
TEST(NativeNameCacheTest, ModuleTableForgetsRecordsNothingHolds) {
  class FilePerAddress : public ProcessSymbols {
   public:
    std::string Symbolize(uint64_t addr) override { return Resolve(addr).name; }
    NativeFrameSymbol Resolve(uint64_t addr) override {
      path_ = absl::StrCat("/lib/lib", addr, ".so");
      NativeCodeLocation location;
      location.path = path_;
      return {"f", location};
    }

   private:
    std::string path_;
  };
  NativeNameCache cache;
  ProcessImage image;
  image.symbols = std::make_unique<FilePerAddress>();
  std::shared_ptr<const NativeModule> kept = cache.Name(image, 0).module;
  for (uint64_t address = 1; address < 1000; ++address) cache.Name(image, address);
  EXPECT_EQ(cache.module_count(), 1000u) << "every record still held by its name";
  cache.Forget(image.id);
  for (uint64_t address = 1000; address < 1100; ++address) cache.Name(image, address);
  EXPECT_LE(cache.module_count(), 2 * 101u + 16);
  EXPECT_EQ(cache.Name(image, 0).module, kept) << "a record still held is found again";
}

TEST(RecorderTest, ProcessWithoutSymbolsStillCountsItsSamples) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  recorder.HandleRecord(SampleRecord(FakeSymbolizer::kGonePid, 1000, "gone", {}, {0xabc}));
  recorder.HandleRecord(SampleRecord(FakeSymbolizer::kGonePid, 1000, "gone", {}, {}));
  EXPECT_EQ(recorder.processes().symbol_failures(), 1u);
  auto folded = Folded(recorder, nullptr);
  EXPECT_EQ(folded.at("gone (999);[unknown] 0xabc"), 1u);
  EXPECT_EQ(folded.at("gone (999);[unknown]"), 1u);
}

// Finds CPython nowhere in /proc (every process has ended); knows one
// executable from an earlier run: linked at 0x1000, its runtime at 0x5000 and
// its eval loop at [0x2000, 0x2400) when the kernel loaded its text at 0x1000.
class ExecOnlyDiscovery : public PythonDiscovery {
 public:
  static constexpr PythonExecutable kKnown = {.dev = 8, .inode = 77, .start_code = 0x1000};

  absl::StatusOr<std::unique_ptr<PythonProcess>> Discover(uint32_t) override {
    return absl::NotFoundError("no such process");
  }
  absl::StatusOr<std::unique_ptr<PythonProcess>> FromExec(
      uint32_t pid, const PythonExecutable& executable) override {
    if (executable.dev != kKnown.dev || executable.inode != kKnown.inode) {
      return absl::NotFoundError("unknown executable");
    }
    PythonInterpreter interpreter;
    interpreter.in_executable = true;
    interpreter.runtime_address = 0x5000;
    interpreter.code_type_address = 0x6000;
    PythonProcess first_run(interpreter, std::make_unique<RemoteProcessMemory>(1),
                            {{0x1000, 0x4000}}, "/srv");
    first_run.set_eval_ranges({{0x2000, 0x2400}});
    return first_run.RunBy(pid, executable.start_code - kKnown.start_code);
  }
};

TEST(RecorderTest, ARunThatEndsBeforeItIsReadIsCPythonByItsExecRecord) {
  FakeSymbolizer symbolizer;
  ExecOnlyDiscovery discovery;
  Recorder recorder(&symbolizer, &discovery, {}, NoProcComm);
  // Loaded 0x7000 bytes above the first run; gone before its samples are read.
  std::vector<uint8_t> exec = ProcessEvent(PYSTROBE_EVENT_EXEC, 41, "python3.11");
  auto* event = reinterpret_cast<pystrobe_process_event*>(exec.data());
  event->python_binary_dev = ExecOnlyDiscovery::kKnown.dev;
  event->python_binary_inode = ExecOnlyDiscovery::kKnown.inode;
  event->start_code = 0x8000;
  recorder.HandleRecord(exec);
  recorder.HandleRecord(SampleRecord(41, 41, "python3.11", {}, {0x9010}));
  // An exec the kernel did not know as CPython's: nothing to go by.
  recorder.HandleRecord(ProcessEvent(PYSTROBE_EVENT_EXEC, 42, "sh"));
  recorder.HandleRecord(SampleRecord(42, 42, "sh", {}, {0x9010}));

  EXPECT_EQ(recorder.processes().python_processes(), 1u);
  const ProcessImage* known = nullptr;
  const ProcessImage* unknown = nullptr;
  for (const auto& [stack, weight] : recorder.stacks().weights()) {
    const ProcessImage& image = recorder.processes().image(stack.image);
    (image.pid == 41 ? known : unknown) = &image;
  }
  ASSERT_NE(known, nullptr);
  ASSERT_NE(known->python, nullptr);
  EXPECT_EQ(known->python->interpreter().pid, 41);
  EXPECT_EQ(known->python->interpreter().runtime_address, 0xc000u);
  EXPECT_EQ(known->python->interpreter().code_type_address, 0xd000u);
  EXPECT_TRUE(known->python->InEvalLoop(0x9010));
  EXPECT_FALSE(known->python->InEvalLoop(0x2010));
  EXPECT_TRUE(known->python->InInterpreter(0xa000));
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ(unknown->python, nullptr);
}

TEST(RecorderTest, MalformedRecordsAreCountedNotTrusted) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  std::vector<uint8_t> truncated = SampleRecord(1, 1, "x", {}, {0x1, 0x2});
  truncated.resize(truncated.size() - 4);
  recorder.HandleRecord(truncated);
  std::vector<uint8_t> lying = SampleRecord(1, 1, "x", {}, {0x1});
  reinterpret_cast<pystrobe_sample*>(lying.data())->user_frames = 500;
  recorder.HandleRecord(lying);
  recorder.HandleRecord(std::vector<uint8_t>{1, 2});
  recorder.HandleRecord(ProcessEvent(77, 1, "x"));
  EXPECT_EQ(recorder.malformed_records(), 4u);
  EXPECT_EQ(recorder.samples(), 0u);
}

TEST(RecorderTest, CodeCopiesAreKeptUntilTheirProcessEndsAndBadOnesCounted) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  pystrobe_python_code_event event = {};
  event.kind = PYSTROBE_EVENT_PYTHON_CODE;
  event.pid = 7;
  event.code = 0x1000;
  event.stamp = 3;
  event.regions_used = 1;
  event.regions[0] = {.address = 0x1000, .size = 8, .offset = 0};
  const size_t size = offsetof(pystrobe_python_code_event, data) + 8;
  const auto* bytes = reinterpret_cast<const uint8_t*>(&event);
  recorder.HandleRecord(std::vector<uint8_t>(bytes, bytes + size));
  EXPECT_EQ(recorder.python_code_copies().size(), 1u);

  // A region claiming bytes the record does not hold is refused.
  recorder.HandleRecord(std::vector<uint8_t>(bytes, bytes + size - 1));
  EXPECT_EQ(recorder.malformed_records(), 1u);
  EXPECT_EQ(recorder.python_code_copies().size(), 1u);

  recorder.HandleRecord(ProcessEvent(PYSTROBE_EVENT_EXIT, 7, "x"));
  EXPECT_EQ(recorder.python_code_copies().size(), 0u) << "its samples are all in by its exit";
}

// Names code by range, as a CUDA program's symbols would read.
class CudaSymbolizer : public NativeSymbolizer {
 public:
  class Symbols : public ProcessSymbols {
   public:
    std::string Symbolize(uint64_t addr) override {
      switch (addr & ~0xfffull) {
        case 0x1000:
          return "cuCtxSynchronize";
        case 0x2000:
          return "main";
        case 0x3000:
          return "libcuda.so.1+0x3000";  // the driver's unnamed inside
        case 0x4000:
          return "cudaMemcpyAsync";
        case 0x5000:
          return "cudaDeviceSynchronize";
      }
      return "?";
    }
  };
  absl::StatusOr<std::unique_ptr<ProcessSymbols>> ForProcess(uint32_t) override {
    return std::make_unique<Symbols>();
  }
};

TEST(RecorderTest, StacksInCudaWaitsEndInGpuWaitOnAndOffCpu) {
  CudaSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  // Spinning inside the driver, under the runtime's and the driver's synchronize.
  recorder.HandleRecord(SampleRecord(3, 3, "train", {}, {0x3010, 0x1010, 0x5010, 0x2010}));
  // An asynchronous copy is the CPU's own work.
  recorder.HandleRecord(SampleRecord(3, 3, "train", {}, {0x4010, 0x2010}));
  EXPECT_THAT(Folded(recorder, nullptr),
              UnorderedElementsAre(Pair("train (3);main;cudaDeviceSynchronize;cuCtxSynchronize;"
                                        "libcuda.so.1+0x3000;[gpu wait]",
                                        1),
                                   Pair("train (3);main;cudaMemcpyAsync", 1)));

  // Asleep in a synchronize is waiting on the GPU; preempted there, on a CPU.
  recorder.HandleRecord(OffCpuRecord(3, 3, "train", {0x1010, 0x2010}, PYSTROBE_OFFCPU_SLEEP, 5000));
  recorder.HandleRecord(
      OffCpuRecord(3, 3, "train", {0x1010, 0x2010}, PYSTROBE_OFFCPU_RUNQUEUE, 1000));
  recorder.HandleRecord(OffCpuRecord(3, 3, "train", {0x4010, 0x2010}, PYSTROBE_OFFCPU_SLEEP, 2000));
  Profile offcpu;
  ProfileBuilder builder(&recorder.processes(), &recorder.python_codes(), &recorder.native_names(),
                         nullptr, {});
  builder.AddTo(recorder.offcpu_stacks(), {.per_nanosecond = 1}, offcpu);
  std::map<std::string, uint64_t> folded;
  for (const ProfileStack& stack : offcpu.stacks()) {
    std::vector<std::string> names;
    for (const Frame& frame : stack.frames) names.push_back(frame.name);
    folded[absl::StrJoin(names, ";")] += stack.count;
  }
  EXPECT_THAT(folded, UnorderedElementsAre(Pair("train (3);main;cuCtxSynchronize;[gpu wait]", 5000),
                                           Pair("train (3);main;cuCtxSynchronize;[runqueue]", 1000),
                                           Pair("train (3);main;cudaMemcpyAsync;[sleep]", 2000)));
}

std::vector<uint8_t> MemoryRecord(uint32_t pid, const char* comm, std::vector<uint64_t> kernel,
                                  std::vector<uint64_t> user, uint64_t bytes) {
  std::vector<uint8_t> record = SampleRecord(pid, pid, comm, std::move(kernel), std::move(user));
  auto* sample = reinterpret_cast<pystrobe_sample*>(record.data());
  sample->kind = PYSTROBE_EVENT_MEMORY;
  sample->weight_ns = bytes;
  return record;
}

TEST(RecorderTest, ResidentGrowthIsWeighedInBytesApartFromCpuSamples) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  recorder.HandleRecord(TimedSampleRecord(4, "svc", {0x10}, 7'000'000));
  recorder.HandleRecord(MemoryRecord(4, "svc", {}, {0x20}, 512 * 1024));
  recorder.HandleRecord(MemoryRecord(4, "svc", {}, {0x20}, 1024 * 1024));
  recorder.HandleRecord(MemoryRecord(4, "svc", {}, {0x30}, 512 * 1024));
  EXPECT_EQ(recorder.samples(), 1u);
  EXPECT_EQ(recorder.memory_stacks().total(), 3u);
  EXPECT_EQ(recorder.memory_stacks().total_nanoseconds(), 2u * 1024 * 1024);  // bytes

  Profile profile;
  ProfileBuilder builder(&recorder.processes(), &recorder.python_codes(), &recorder.native_names(),
                         nullptr, {});
  builder.AddBytesTo(recorder.memory_stacks(), profile);
  std::map<std::string, uint64_t> folded;
  for (const ProfileStack& stack : profile.stacks()) {
    std::vector<std::string> names;
    for (const Frame& frame : stack.frames) names.push_back(frame.name);
    folded[absl::StrJoin(names, ";")] += stack.count;
  }
  EXPECT_THAT(folded, UnorderedElementsAre(Pair("svc (4);fn_20_in_4#1", 1536 * 1024),
                                           Pair("svc (4);fn_30_in_4#1", 512 * 1024)));
  // Bytes, not time: the profile is not weighed by nanoseconds.
  EXPECT_EQ(profile.total_nanoseconds(), 0u);
}

std::vector<uint8_t> AllocRecord(uint32_t pid, std::vector<uint64_t> user, uint64_t bytes,
                                 uint64_t address) {
  std::vector<uint8_t> record = MemoryRecord(pid, "svc", {}, std::move(user), bytes);
  auto* sample = reinterpret_cast<pystrobe_sample*>(record.data());
  sample->kind = PYSTROBE_EVENT_ALLOC;
  sample->address = address;
  return record;
}

std::vector<uint8_t> FreeRecord(uint32_t pid, uint64_t address) {
  pystrobe_free_event event = {.kind = PYSTROBE_EVENT_FREE, .pid = pid, .address = address};
  const auto* bytes = reinterpret_cast<const uint8_t*>(&event);
  return std::vector<uint8_t>(bytes, bytes + sizeof(event));
}

TEST(RecorderTest, SampledBlocksStayInUseUntilFreedAndAllCountAsAllocated) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  recorder.HandleRecord(AllocRecord(4, {0x20}, 1000, 0xa000));  // leaks
  recorder.HandleRecord(AllocRecord(4, {0x30}, 3000, 0xb000));  // freed
  recorder.HandleRecord(FreeRecord(4, 0xb000));
  recorder.HandleRecord(FreeRecord(5, 0xa000));  // another process's block: not ours
  EXPECT_EQ(recorder.allocation_stacks().total_nanoseconds(), 4000u);
  StackAggregator in_use = recorder.InUseStacks();
  EXPECT_EQ(in_use.total(), 1u);
  EXPECT_EQ(in_use.total_nanoseconds(), 1000u);
  EXPECT_EQ(recorder.malformed_records(), 0u);
}

std::vector<uint8_t> FinalizeRecord(uint32_t pid) {
  pystrobe_finalize_event event = {.kind = PYSTROBE_EVENT_FINALIZE, .pid = pid, .time_ns = 1};
  const auto* bytes = reinterpret_cast<const uint8_t*>(&event);
  return std::vector<uint8_t>(bytes, bytes + sizeof(event));
}

TEST(RecorderTest, WhatAPythonProcessHeldWhenFinalizationBeganStaysInUseThroughTeardown) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  recorder.HandleRecord(AllocRecord(4, {0x20}, 1000, 0xa000));  // a module global
  recorder.HandleRecord(AllocRecord(4, {0x30}, 3000, 0xb000));  // freed before the end
  recorder.HandleRecord(FreeRecord(4, 0xb000));
  recorder.HandleRecord(FinalizeRecord(4));
  // Teardown frees the global and allocates on its own: neither changes the view.
  recorder.HandleRecord(FreeRecord(4, 0xa000));
  recorder.HandleRecord(AllocRecord(4, {0x40}, 500, 0xc000));
  recorder.HandleRecord(ProcessEvent(PYSTROBE_EVENT_EXIT, 4, "svc"));
  StackAggregator in_use = recorder.InUseStacks();
  EXPECT_EQ(in_use.total(), 1u);
  EXPECT_EQ(in_use.total_nanoseconds(), 1000u);
  Recorder::InUseTotals totals = recorder.InUseByMoment();
  EXPECT_EQ(totals.at_finalization_bytes, 1000u);
  EXPECT_EQ(totals.finalized_processes, 1u);
  EXPECT_EQ(totals.exited_processes, 0u);
  EXPECT_EQ(totals.at_exit_bytes + totals.at_end_bytes, 0u);
  EXPECT_EQ(recorder.malformed_records(), 0u);
}

TEST(RecorderTest, InUseIsAtExitForAnExitedProcessAndAtTheEndForOneStillRunning) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, NoProcComm);
  recorder.HandleRecord(AllocRecord(4, {0x20}, 1000, 0xa000));
  recorder.HandleRecord(AllocRecord(5, {0x20}, 2000, 0xa000));  // same address, another process
  recorder.HandleRecord(ProcessEvent(PYSTROBE_EVENT_EXIT, 4, "svc"));
  Recorder::InUseTotals totals = recorder.InUseByMoment();
  EXPECT_EQ(totals.at_exit_bytes, 1000u);
  EXPECT_EQ(totals.exited_processes, 1u);
  EXPECT_EQ(totals.at_end_bytes, 2000u);
  EXPECT_EQ(totals.running_processes, 1u);
  EXPECT_EQ(recorder.InUseStacks().total_nanoseconds(), 3000u);
}

// A running task's label ([task NAME] and its awaiters' frames) stands for
// all its samples. A read that could not see an awaiter, or saw none (memory
// that changed under the read), keeps the chain read before; a whole chain
// read later replaces it.
TEST(PythonProcessTest, ATornReadOfTheTasksKeepsTheAwaitersReadBefore) {
  PythonProcess python(PythonInterpreter(), std::make_unique<RemoteProcessMemory>(1), {}, "");
  constexpr uint64_t kCrunchCode = 0xc0de;
  auto task = [](uint64_t address, std::string name, uint64_t root_code,
                 std::vector<uint64_t> awaited_by, std::string frame) {
    AsyncioTask t;
    t.address = address;
    t.name = std::move(name);
    t.root_code_address = root_code;
    t.awaited_by = std::move(awaited_by);
    t.stack.push_back({.name = std::move(frame), .filename = "service.py", .line = 1});
    return t;
  };
  auto awaiters = [&]() {
    const auto* tasks = python.AsyncioTasksRootedAt(kCrunchCode);
    std::vector<std::string> names;
    if (tasks == nullptr || !tasks->contains("cpu-0")) return names;
    for (const PythonFrameSymbol& frame : tasks->at("cpu-0").awaiter_frames) {
      names.push_back(frame.name);
    }
    return names;
  };
  const AsyncioTask main_task = task(0x100, "main", 0x3a1, {}, "main");
  const AsyncioTask supervisor = task(0x300, "supervisor", 0x5e9, {}, "supervise");

  // Not awaited yet: no chain.
  python.TakeAsyncioSnapshot({.tasks = {task(0x200, "cpu-0", kCrunchCode, {}, "batch_loop")}});
  EXPECT_THAT(awaiters(), ElementsAre());
  python.TakeAsyncioSnapshot(
      {.tasks = {main_task, task(0x200, "cpu-0", kCrunchCode, {0x100}, "batch_loop")}});
  EXPECT_THAT(awaiters(), ElementsAre("main"));
  // main unreadable this time.
  python.TakeAsyncioSnapshot(
      {.tasks = {task(0x200, "cpu-0", kCrunchCode, {0x100}, "batch_loop")}, .unreadable = 1});
  EXPECT_THAT(awaiters(), ElementsAre("main"));
  // cpu-0's done callbacks torn: no awaiter read.
  python.TakeAsyncioSnapshot(
      {.tasks = {main_task, task(0x200, "cpu-0", kCrunchCode, {}, "batch_loop")}});
  EXPECT_THAT(awaiters(), ElementsAre("main"));
  // Awaited by another task, read whole: the new chain.
  python.TakeAsyncioSnapshot(
      {.tasks = {main_task, supervisor, task(0x200, "cpu-0", kCrunchCode, {0x300}, "batch_loop")}});
  EXPECT_THAT(awaiters(), ElementsAre("supervise"));
}

// Each read of the tasks charges the suspended ones the time since the read
// before, up to a second (a longer gap: the process went unsampled). A slow
// read spaces the next one 20 times its length away; that gap, chosen by the
// reads themselves, is charged whole. Times are given: a read "took" 10 s
// because it was told it began 10 s ago.
TEST(PythonProcessTest, AGapTheReadsSpacingChoseIsChargedWhole) {
  PythonInterpreter interpreter;
  interpreter.version = {3, 11, 0};
  absl::StatusOr<PythonLayout> layout = PythonLayoutForVersion(interpreter.version);
  ASSERT_TRUE(layout.ok()) << layout.status();
  interpreter.layout = *layout;
  // Nothing to read at _PyRuntime 0: each read fails fast, and counts.
  PythonProcess python(interpreter, std::make_unique<RemoteProcessMemory>(getpid()), {}, "");
  const absl::Time began = absl::Now() - absl::Seconds(10);
  ASSERT_TRUE(python.RefreshAsyncioTasks(began));
  EXPECT_EQ(python.await_charge(), absl::ZeroDuration());  // no read before it
  // 20 x 10 s: the next read is not before 200 s later.
  EXPECT_FALSE(python.RefreshAsyncioTasks(began + absl::Seconds(150)));
  ASSERT_TRUE(python.RefreshAsyncioTasks(began + absl::Seconds(205)));
  EXPECT_GE(python.await_charge(), absl::Seconds(200));
  EXPECT_LE(python.await_charge(), absl::Seconds(205));
  // A quick read spaces the next 200 ms away: a 5 s gap is the process
  // unsampled, charged a second.
  ASSERT_TRUE(python.RefreshAsyncioTasks(began + absl::Seconds(210)));
  EXPECT_EQ(python.await_charge(), PythonProcess::kMaxAwaitCharge);
}

}  // namespace
}  // namespace pystrobe

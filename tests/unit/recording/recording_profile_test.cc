// Which profile a recording builds: `record`'s CPU time, resident growth and
// allocations, and the daemon's on-demand recordings, from the same code.
#include "daemon/recording/recording_profile.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/recording/native_name_cache.h"
#include "daemon/recording/python_code_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::Pair;
using ::testing::UnorderedElementsAre;

// Names address A "fn_<hex A>".
class FakeSymbolizer : public NativeSymbolizer {
 public:
  class Symbols : public ProcessSymbols {
   public:
    std::string Symbolize(uint64_t addr) override { return absl::StrCat("fn_", absl::Hex(addr)); }
  };
  absl::StatusOr<std::unique_ptr<ProcessSymbols>> ForProcess(uint32_t) override {
    return std::make_unique<Symbols>();
  }
};

// Processes named "svc", in our own PID namespace: nothing read from /proc.
class RecordingProfileTest : public ::testing::Test {
 protected:
  StackAggregator Stacks(uint32_t pid, uint64_t address, StackWeight weight) {
    StackAggregator stacks;
    RawStack stack;
    stack.image = *processes_.Track(pid);
    stack.user_ips = {address};
    stacks.Add(std::move(stack), weight);
    return stacks;
  }

  Profile Build(const RecordingProfileSpec& spec, const RecordedStacks& stacks) {
    Profile profile;
    ProfileBuilder builder(&processes_, &python_codes_, &native_names_, nullptr, spec.names);
    AddRecordedStacks(spec, stacks, builder, processes_, profile);
    return profile;
  }

  static std::map<std::string, uint64_t> Folded(const Profile& profile) {
    std::map<std::string, uint64_t> folded;
    for (const ProfileStack& stack : profile.stacks()) {
      std::vector<std::string> names;
      for (const Frame& frame : stack.frames) names.push_back(frame.name);
      folded[absl::StrJoin(names, ";")] += stack.count;
    }
    return folded;
  }

  FakeSymbolizer symbolizer_;
  ProcessTable processes_{&symbolizer_, nullptr, [](uint32_t) { return std::string("svc"); },
                          [](uint32_t) { return uint32_t{0}; }};
  PythonCodeTable python_codes_;
  NativeNameCache native_names_;
};

TEST(RecordingTargetTest, NamesTheCommandThePidsOrEveryProcess) {
  EXPECT_EQ(RecordingTarget({"python3", "app.py"}, {}), "python3 app.py");
  EXPECT_EQ(RecordingTarget({}, {4, 7}), "pid 4, 7");
  EXPECT_EQ(RecordingTarget({}, {}), "all processes");
}

TEST(RecordingTitleTest, SaysWhoRecordedWhatAndInWhichUnit) {
  RecordingProfileSpec spec = {.target = "pid 4"};
  EXPECT_EQ(RecordingTitle(spec), "pystrobe record: pid 4");
  spec.recorded_by = "pystrobe record (daemon)";
  EXPECT_EQ(RecordingTitle(spec), "pystrobe record (daemon): pid 4");
  spec = {.measure = RecordingMeasure::kResidentGrowth, .target = "pid 4"};
  EXPECT_EQ(RecordingTitle(spec), "pystrobe record --memory: pid 4 (resident growth, bytes)");
  spec = {.measure = RecordingMeasure::kAllocations, .target = "pid 4", .alloc_space = true};
  EXPECT_EQ(RecordingTitle(spec), "pystrobe record --allocations: pid 4 (allocated, bytes)");
  spec.alloc_space = false;
  EXPECT_EQ(RecordingTitle(spec, {.finalized_processes = 1, .running_processes = 1}),
            "pystrobe record --allocations: pid 4 (held when Python finalization began or when "
            "the recording ended, bytes)");
}

TEST_F(RecordingProfileTest, CpuTimeWeighsOnAndOffCpuStacksAtTheRecordingsRate) {
  StackAggregator on = Stacks(4, 0x10, {.samples = 3, .nanoseconds = 3'000'000});
  StackAggregator off = Stacks(4, 0x20, {.samples = 1, .nanoseconds = 5'000'000});
  StackAggregator growth = Stacks(4, 0x30, {.samples = 1, .nanoseconds = 4096});
  RecordingProfileSpec spec = {.time = {.offcpu = true, .rate_hz = 99}};
  Profile profile = Build(spec, {.on_cpu = &on, .off_cpu = &off, .resident_growth = &growth});
  EXPECT_EQ(profile.count_unit, "microseconds");
  EXPECT_EQ(profile.sample_rate_hz, 99);
  EXPECT_THAT(Folded(profile), UnorderedElementsAre(Pair("[on-cpu];svc (4);fn_10", 3000),
                                                    Pair("[off-cpu];svc (4);fn_20", 5000)));

  // Without --off-cpu or --idle, time off CPU is not in the profile.
  spec.time = {.rate_hz = 99};
  profile = Build(spec, {.on_cpu = &on, .off_cpu = &off});
  EXPECT_EQ(profile.count_unit, "samples");
  EXPECT_THAT(Folded(profile), UnorderedElementsAre(Pair("svc (4);fn_10", 3)));
}

TEST_F(RecordingProfileTest, ResidentGrowthAndAllocationsWeighBytesAtTheirSamplingInterval) {
  StackAggregator on = Stacks(4, 0x10, {.samples = 3, .nanoseconds = 3'000'000});
  StackAggregator growth = Stacks(4, 0x30, {.samples = 2, .nanoseconds = 1 << 20});
  StackAggregator allocated = Stacks(4, 0x40, {.samples = 1, .nanoseconds = 4096});
  RecordedStacks stacks = {.on_cpu = &on, .resident_growth = &growth, .allocations = &allocated};

  Profile profile = Build({.measure = RecordingMeasure::kResidentGrowth}, stacks);
  EXPECT_EQ(profile.count_unit, "bytes");
  EXPECT_EQ(profile.sample_rate_hz, 0);
  EXPECT_EQ(profile.sampling_interval_bytes, SamplerConfig{}.memory_sample_bytes);
  EXPECT_THAT(Folded(profile), UnorderedElementsAre(Pair("svc (4);fn_30", 1 << 20)));

  RecordingProfileSpec spec = {.measure = RecordingMeasure::kAllocations,
                               .alloc_sample_bytes = 65536};
  profile = Build(spec, stacks);
  EXPECT_EQ(profile.count_unit, "inuse_bytes");
  EXPECT_EQ(profile.sampling_interval_bytes, 65536u);
  EXPECT_THAT(Folded(profile), UnorderedElementsAre(Pair("svc (4);fn_40", 4096)));
  spec.alloc_space = true;
  EXPECT_EQ(Build(spec, stacks).count_unit, "alloc_bytes");
}

TEST_F(RecordingProfileTest, StacksAddedWindowByWindowAddUp) {
  StackAggregator first = Stacks(4, 0x10, {.samples = 2, .nanoseconds = 2'000'000});
  StackAggregator second = Stacks(4, 0x10, {.samples = 3, .nanoseconds = 3'000'000});
  RecordingProfileSpec spec = {.recorded_by = "pystrobe record (daemon)", .time = {.rate_hz = 49}};
  Profile profile;
  ProfileBuilder builder(&processes_, &python_codes_, &native_names_, nullptr, spec.names);
  AddRecordedStacks(spec, {.on_cpu = &first}, builder, processes_, profile);
  AddRecordedStacks(spec, {.on_cpu = &second}, builder, processes_, profile);
  EXPECT_EQ(profile.sample_rate_hz, 49);
  EXPECT_EQ(profile.total_count(), 5u);
}

}  // namespace
}  // namespace pystrobe

// The daemon's service classes without BPF: the profile directory and its
// retention, per-process series with bounded cardinality and their labels,
// the recorder's windows and evictions, and the labels of sampled processes.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/recording/process_labels.h"
#include "daemon/recording/recorder.h"
#include "daemon/service/oom_report.h"
#include "daemon/service/process_metrics.h"
#include "daemon/service/profile_directory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/pystrobe-service-test-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

size_t ProfileFiles(const std::string& dir) {
  size_t count = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    count += entry.path().string().ends_with(".pb.gz");
  }
  return count;
}

ProfileWindow WindowAt(uint64_t sequence, absl::Time start) {
  ProfileWindow window;
  window.sequence = sequence;
  window.start = start;
  window.end = start + absl::Seconds(60);
  window.profile.sample_rate_hz = 19;
  window.profile.Add({{"main (1)", FrameKind::kProcess}, {"work", FrameKind::kNative}}, 5);
  return window;
}

TEST(ProfileDirectoryTest, EachWindowIsOneGzippedPprofFile) {
  TempDir dir;
  ProfileDirectory profiles(dir.path() + "/profiles", RetentionConfig{});
  ASSERT_TRUE(profiles.Open().ok());
  absl::Time start = absl::FromUnixSeconds(1700000000);
  ASSERT_TRUE(profiles.Consume(WindowAt(1, start)).ok());
  ASSERT_TRUE(profiles.Consume(WindowAt(2, start + absl::Seconds(60))).ok());
  EXPECT_EQ(ProfileFiles(dir.path() + "/profiles"), 2u);
  EXPECT_TRUE(fs::exists(dir.path() + "/profiles/pystrobe-20231114T221320Z-000001.pb.gz"));
  std::ifstream file(dir.path() + "/profiles/pystrobe-20231114T221320Z-000001.pb.gz",
                     std::ios::binary);
  unsigned char magic[2] = {};
  file.read(reinterpret_cast<char*>(magic), 2);
  EXPECT_EQ(magic[0], 0x1f);
  EXPECT_EQ(magic[1], 0x8b);
  EXPECT_EQ(profiles.stats().windows_written, 2u);
}

TEST(ProfileDirectoryTest, OpenRemovesTemporaryFilesOfAKilledDaemonButNothingElse) {
  TempDir dir;
  std::ofstream(dir.path() + "/pystrobe-20231114T221320Z-000001.pb.gz.tmp") << "half";
  std::ofstream(dir.path() + "/notes.txt") << "operator's file";
  ProfileDirectory profiles(dir.path(), RetentionConfig{});
  ASSERT_TRUE(profiles.Open().ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/pystrobe-20231114T221320Z-000001.pb.gz.tmp"));
  EXPECT_TRUE(fs::exists(dir.path() + "/notes.txt"));
}

TEST(ProfileDirectoryTest, RetentionDeletesProfilesOlderThanMaxAge) {
  TempDir dir;
  static absl::Time now = absl::Now();
  ProfileDirectory profiles(dir.path(),
                            RetentionConfig{.max_age = absl::Hours(1), .max_total_size_bytes = 0},
                            [] { return now; });
  ASSERT_TRUE(profiles.Open().ok());
  absl::Time start = absl::FromUnixSeconds(1700000000);
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(profiles.Consume(WindowAt(i, start + absl::Minutes(i))).ok());
  }
  // Age the first two.
  for (int i = 1; i <= 2; ++i) {
    fs::path path =
        fs::path(dir.path()) / ProfileDirectory::FileName(WindowAt(i, start + absl::Minutes(i)));
    fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::hours(2));
  }
  ASSERT_TRUE(profiles.EnforceRetention().ok());
  EXPECT_EQ(ProfileFiles(dir.path()), 1u);
  EXPECT_EQ(profiles.stats().files_deleted_age, 2u);
}

TEST(ProfileDirectoryTest, RetentionDeletesTheOldestUntilWithinTotalSize) {
  TempDir dir;
  ProfileDirectory profiles(
      dir.path(), RetentionConfig{.max_age = absl::ZeroDuration(), .max_total_size_bytes = 0});
  ASSERT_TRUE(profiles.Open().ok());
  absl::Time start = absl::FromUnixSeconds(1700000000);
  ASSERT_TRUE(profiles.Consume(WindowAt(1, start)).ok());
  uint64_t one_file =
      fs::file_size(fs::path(dir.path()) / ProfileDirectory::FileName(WindowAt(1, start)));
  // Room for two files: the third window pushes the first out.
  profiles.set_retention(
      {.max_age = absl::ZeroDuration(), .max_total_size_bytes = 2 * one_file + 10});
  ASSERT_TRUE(profiles.Consume(WindowAt(2, start + absl::Seconds(1))).ok());
  ASSERT_TRUE(profiles.Consume(WindowAt(3, start + absl::Seconds(2))).ok());
  EXPECT_EQ(ProfileFiles(dir.path()), 2u);
  EXPECT_FALSE(fs::exists(fs::path(dir.path()) / ProfileDirectory::FileName(WindowAt(1, start))));
  EXPECT_EQ(profiles.stats().files_deleted_size, 1u);
}

ProcessCounters Process(uint32_t pid, uint64_t cpu_ns, bool exited = false) {
  ProcessCounters process;
  process.pid = pid;
  process.start_ns = pid * 1000;
  process.comm = absl::StrCat("proc", pid);
  process.raw.runtime_ns = cpu_ns;
  process.raw.utime_ns = cpu_ns;
  process.exited = exited;
  return process;
}

std::vector<std::string> SeriesPids(const ProcessMetrics& metrics) {
  std::vector<std::string> pids;
  for (const prometheus::MetricFamily& family : metrics.Families()) {
    if (family.name != "pystrobe_process_cpu_user_seconds_total") continue;
    for (const prometheus::ClientMetric& metric : family.metric)
      pids.push_back(metric.label[0].value);
  }
  return pids;
}

TEST(ProcessMetricsTest, TopProcessesByCpuGetSeriesTheRestAreSummedAsOther) {
  ProcessMetrics metrics({.max_series = 2, .exited_grace = absl::Minutes(2), .static_labels = {}},
                         nullptr);
  absl::Time now = absl::Now();
  metrics.Update({Process(1, 1'000'000'000), Process(2, 3'000'000'000), Process(3, 2'000'000'000),
                  Process(4, 10)},
                 now);
  EXPECT_THAT(SeriesPids(metrics), testing::ElementsAre("2", "3", "other"));
  for (const prometheus::MetricFamily& family : metrics.Families()) {
    if (family.name != "pystrobe_process_cpu_user_seconds_total") continue;
    EXPECT_NEAR(family.metric.back().counter.value, 1.0, 1e-6);  // pids 1 and 4
  }
}

TEST(ProcessMetricsTest, ExitedProcessKeepsItsSeriesForTheGracePeriodOnly) {
  ProcessMetrics metrics({.max_series = 5, .exited_grace = absl::Seconds(10), .static_labels = {}},
                         nullptr);
  absl::Time now = absl::Now();
  metrics.Update({Process(7, 1'000'000'000)}, now);
  metrics.Update({Process(7, 2'000'000'000, /*exited=*/true)}, now + absl::Seconds(1));
  EXPECT_THAT(SeriesPids(metrics), testing::ElementsAre("7", "other"));
  metrics.Update({}, now + absl::Seconds(12));
  EXPECT_THAT(SeriesPids(metrics), testing::ElementsAre("other"));
  EXPECT_EQ(metrics.tracked(), 0u);
}

TEST(ProcessMetricsTest, SeriesCarryTheCgroupTheContainerAndThePidInItsNamespace) {
  ProcessMetrics metrics(
      {.max_series = 5, .exited_grace = absl::Minutes(2), .static_labels = {}}, [](uint32_t pid) {
        return pid == 7 ? ProcessPlacement{.cgroup_path = "/system.slice/docker-c0ffee.scope",
                                           .container_id = "c0ffee",
                                           .pid_in_namespace = 1}
                        : ProcessPlacement();
      });
  metrics.Update({Process(7, 2'000'000'000), Process(8, 1'000'000'000)}, absl::Now());
  std::map<std::string, std::map<std::string, std::string>> labels_by_pid;
  for (const prometheus::MetricFamily& family : metrics.Families()) {
    if (family.name != "pystrobe_process_cpu_user_seconds_total") continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::map<std::string, std::string> labels;
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        labels[label.name] = label.value;
      }
      labels_by_pid[labels["pid"]] = labels;
    }
  }
  ASSERT_EQ(labels_by_pid.size(), 3u);  // 7, 8 and other
  EXPECT_EQ(labels_by_pid["7"]["cgroup"], "/system.slice/docker-c0ffee.scope");
  EXPECT_EQ(labels_by_pid["7"]["container_id"], "c0ffee");
  EXPECT_EQ(labels_by_pid["7"]["pid_in_namespace"], "1");
  // In the daemon's own namespace the pid is the same: the label stays empty,
  // as container_id does outside containers.
  EXPECT_EQ(labels_by_pid["8"]["pid_in_namespace"], "");
  EXPECT_EQ(labels_by_pid["other"]["pid_in_namespace"], "");
  EXPECT_EQ(labels_by_pid["other"]["cgroup"], "");
}

class FakeSymbols : public ProcessSymbols {
 public:
  std::string Symbolize(uint64_t address) override { return absl::StrCat("fn_", address); }
};
class FakeSymbolizer : public NativeSymbolizer {
 public:
  absl::StatusOr<std::unique_ptr<ProcessSymbols>> ForProcess(uint32_t) override {
    return std::make_unique<FakeSymbols>();
  }
};

std::vector<uint8_t> Sample(uint32_t pid, uint64_t ip) {
  pystrobe_sample sample = {};
  sample.kind = PYSTROBE_EVENT_SAMPLE;
  sample.pid = pid;
  sample.tid = pid;
  std::strcpy(sample.comm, "short");
  sample.user_frames = 1;
  sample.data[0] = ip;
  const auto* bytes = reinterpret_cast<const uint8_t*>(&sample);
  return std::vector<uint8_t>(bytes, bytes + offsetof(pystrobe_sample, data) + 8);
}

std::vector<uint8_t> Exit(uint32_t pid) {
  pystrobe_process_event event = {};
  event.kind = PYSTROBE_EVENT_EXIT;
  event.pid = pid;
  const auto* bytes = reinterpret_cast<const uint8_t*>(&event);
  return std::vector<uint8_t>(bytes, bytes + sizeof(event));
}

TEST(RecorderWindowTest, ExitedProcessesAreForgottenAfterTheirWindowAndMemoryStaysFlat) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, [](uint32_t) { return std::string(); });
  for (int window = 0; window < 50; ++window) {
    for (uint32_t i = 0; i < 100; ++i) {
      uint32_t pid = 1000 + window * 100 + i;
      recorder.HandleRecord(Sample(pid, 0x1000 + i));
      recorder.HandleRecord(Exit(pid));
    }
    WindowStacks stacks = recorder.TakeStacks();
    EXPECT_EQ(stacks.on_cpu.total(), 100u);
    EXPECT_EQ(recorder.samples(), 0u);
    recorder.EvictAfterWindow(1000, 1000);
    EXPECT_EQ(recorder.processes().image_count(), 0u);
    EXPECT_EQ(recorder.native_names().size(), 0u);
  }
  EXPECT_EQ(recorder.processes().images_evicted(), 5000u);
}

TEST(RecorderWindowTest, NewProcessesBeyondTheTrackedLimitAreRefusedAndCounted) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {}, [](uint32_t) { return std::string(); });
  recorder.processes().set_max_live_images(2);
  for (uint32_t pid = 1; pid <= 3; ++pid) recorder.HandleRecord(Sample(pid, 0x10));
  EXPECT_EQ(recorder.samples(), 2u);
  EXPECT_EQ(recorder.samples_of_refused_processes(), 1u);
  recorder.HandleRecord(Exit(1));
  recorder.HandleRecord(Sample(3, 0x10));
  EXPECT_EQ(recorder.samples(), 3u);
}

TEST(ProcessLabelsTest, APidInANestedNamespaceIsLabelledWithItsPidThere) {
  FakeSymbolizer symbolizer;
  Recorder recorder(
      &symbolizer, nullptr, {}, [](uint32_t) { return std::string(); },
      [](uint32_t pid) { return pid == 4100 ? 1u : 0u; });
  recorder.HandleRecord(Sample(4100, 0x10));
  recorder.HandleRecord(Sample(4200, 0x10));
  recorder.HandleRecord(Exit(4100));  // read at its first sample, kept after it exits
  EXPECT_EQ(recorder.processes().image(0).pid_in_namespace, 1u);
  Profile profile;
  AddProcessLabels(recorder.processes(), {&recorder.stacks(), &recorder.offcpu_stacks()}, profile,
                   [](const ProcessImage& image) {
                     return std::vector<ProfileLabel>{{"cgroup", absl::StrCat("/g", image.pid)}};
                   });
  EXPECT_THAT(profile.process_labels[4100],
              testing::ElementsAre(ProfileLabel{"cgroup", "/g4100"},
                                   ProfileLabel{"pid_in_namespace", "1"}));
  EXPECT_THAT(profile.process_labels[4200], testing::ElementsAre(ProfileLabel{"cgroup", "/g4200"}));
}

TEST(RecorderWindowTest, StacksBeyondTheWindowLimitAreDroppedAndCounted) {
  FakeSymbolizer symbolizer;
  Recorder recorder(&symbolizer, nullptr, {.max_stacks = 2},
                    [](uint32_t) { return std::string(); });
  for (uint64_t ip = 1; ip <= 3; ++ip) recorder.HandleRecord(Sample(5, ip));
  recorder.HandleRecord(Sample(5, 1));  // a known stack is still counted
  EXPECT_EQ(recorder.samples(), 3u);
  EXPECT_EQ(recorder.samples_over_stack_limit(), 1u);
}

TEST(ProcessMetricsTest, ResidentGaugesPerKindForSeriesAndTheLiveOthersSummed) {
  ProcessMetrics metrics({.max_series = 1, .exited_grace = absl::Minutes(2), .static_labels = {}},
                         nullptr);
  ProcessCounters busy = Process(1, 2'000'000'000);
  busy.memory = ResidentMemory{.anon_bytes = 100,
                               .file_bytes = 20,
                               .shmem_bytes = 3,
                               .swap_bytes = 4,
                               .peak_bytes = 200,
                               .read_ns = 1};
  ProcessCounters idle = Process(2, 10);
  idle.memory = ResidentMemory{.anon_bytes = 7, .peak_bytes = 9, .read_ns = 1};
  metrics.Update({busy, idle}, absl::Now());
  std::map<std::string, double> seen;
  for (const prometheus::MetricFamily& family : metrics.Families()) {
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::string key = family.name;
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        if (label.name == "pid" || label.name == "memory") absl::StrAppend(&key, ",", label.value);
      }
      seen[key] = metric.gauge.value;
    }
  }
  EXPECT_EQ(seen["pystrobe_process_resident_bytes,1,anon"], 100);
  EXPECT_EQ(seen["pystrobe_process_resident_bytes,1,file"], 20);
  EXPECT_EQ(seen["pystrobe_process_resident_bytes,1,shmem"], 3);
  EXPECT_EQ(seen["pystrobe_process_swap_bytes,1"], 4);
  EXPECT_EQ(seen["pystrobe_process_resident_peak_bytes,1"], 200);
  EXPECT_EQ(seen["pystrobe_process_resident_bytes,other,anon"], 7);
  EXPECT_EQ(seen["pystrobe_process_resident_peak_bytes,other"], 9);
}

TEST(ProcessMetricsTest, OomKillIsCountedAndReportedOnceAndTheCountStays) {
  ProcessMetrics metrics({.max_series = 5, .exited_grace = absl::Minutes(2), .static_labels = {}},
                         nullptr);
  ProcessCounters victim = Process(9, 10, /*exited=*/true);
  victim.oom_killed = true;
  victim.memory = ResidentMemory{.anon_bytes = 150 << 20, .peak_bytes = 151 << 20, .read_ns = 1};
  absl::Time now = absl::FromUnixSeconds(1'795'000'000);
  metrics.Update({victim}, now);
  // The session forgets an exited process in the kernel once read.
  metrics.Update({}, now + absl::Seconds(1));
  std::vector<OomVictim> victims = metrics.TakeOomVictims();
  ASSERT_EQ(victims.size(), 1u);
  EXPECT_TRUE(metrics.TakeOomVictims().empty());
  double kills = 0;
  for (const prometheus::MetricFamily& family : metrics.Families()) {
    if (family.name == "pystrobe_oom_kills_total") kills = family.metric.at(0).counter.value;
  }
  EXPECT_EQ(kills, 1);
  EXPECT_THAT(OomReportFileName(victims[0]),
              testing::MatchesRegex("oom-[0-9]{8}T[0-9]{6}Z-9\\.json"));
  OomReport report{.victim = victims[0]};
  EXPECT_THAT(OomReportJson(report),
              testing::HasSubstr("\"pid\":9,\"comm\":\"proc9\",\"cgroup\":\"\""));
  EXPECT_THAT(OomReportJson(report), testing::HasSubstr("\"rss_anon_bytes\":157286400"));
  report.growth = {{.frames = {"main", "grow"}, .bytes = 7, .share = 1}};
  report.threads = {{.tid = 9, .name = "proc9", .frames = {"<module> (x.py:3)", "grow (x.py:1)"}},
                    {.tid = 11, .name = "loader \"1\"", .frames = {}}};
  EXPECT_THAT(OomReportJson(report),
              testing::HasSubstr("\"threads\":[{\"tid\":9,\"name\":\"proc9\",\"stack\":["
                                 "\"<module> (x.py:3)\",\"grow (x.py:1)\"]},{\"tid\":11,"
                                 "\"name\":\"loader \\\"1\\\"\",\"stack\":[]}],"
                                 "\"memory_growth_stacks\":[{\"stack\":[\"main\",\"grow\"],"
                                 "\"bytes\":7,\"share\":1.0000}]}"));
}

TEST(PendingOomReportsTest, AReportIsDueTheTickAfterItsVictimExitedOrAfterTheLongestWait) {
  PendingOomReports pending;
  absl::Time now = absl::FromUnixSeconds(1'795'000'000);
  OomReport exiting, stuck;
  exiting.victim.pid = 7;
  stuck.victim.pid = 8;
  pending.Add(exiting, now);
  pending.Add(stuck, now);
  // Its exit seen at this tick: its threads' stacks are read by the next.
  EXPECT_TRUE(pending.TakeDue(now, {7}).empty());
  std::vector<OomReport> due = pending.TakeDue(now + absl::Seconds(1), {});
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].victim.pid, 7u);
  EXPECT_TRUE(pending.TakeDue(now + absl::Seconds(2), {}).empty());
  due = pending.TakeDue(now + PendingOomReports::kMaxWait, {});
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].victim.pid, 8u);
  EXPECT_TRUE(pending.empty());
  // Before a window is cut, every report is written with what has come.
  pending.Add(stuck, now);
  EXPECT_EQ(pending.TakeDue(now, {}, /*all=*/true).size(), 1u);
}

TEST(ProfileDirectoryTest, AWindowsResidentGrowthIsAMemoryFileBesideIt) {
  TempDir dir;
  ProfileDirectory profiles(dir.path() + "/profiles", RetentionConfig{});
  ASSERT_TRUE(profiles.Open().ok());
  ProfileWindow window = WindowAt(1, absl::FromUnixSeconds(1700000000));
  window.memory.emplace();
  window.memory->count_unit = "bytes";
  window.memory->Add({{"main (1)", FrameKind::kProcess}, {"grow", FrameKind::kNative}}, 1 << 20);
  ASSERT_TRUE(profiles.Consume(window).ok());
  EXPECT_TRUE(fs::exists(dir.path() + "/profiles/pystrobe-20231114T221320Z-000001.pb.gz"));
  EXPECT_TRUE(fs::exists(dir.path() + "/profiles/pystrobe-20231114T221320Z-000001-memory.pb.gz"));
  EXPECT_EQ(ProfileDirectory::MemoryFileName(window),
            "pystrobe-20231114T221320Z-000001-memory.pb.gz");
  EXPECT_EQ(profiles.stats().windows_written, 1u);
  EXPECT_EQ(profiles.stats().files, 2u);  // both under the retention
}

}  // namespace
}  // namespace pystrobe

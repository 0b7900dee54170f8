// Accounting's userspace logic without the kernel: the user/system split,
// counter differences, the verdict rules, the stat report and top's screen.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/accounting/memory_timeline.h"
#include "daemon/accounting/process_counters.h"
#include "daemon/accounting/sample_tally.h"
#include "daemon/accounting/stat_analysis.h"
#include "daemon/accounting/stat_report.h"
#include "daemon/accounting/thread_view.h"
#include "daemon/accounting/top_screen.h"
#include "daemon/accounting/verdict.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(FiguresFrom, SplitsExactRuntimeByTickRatioLikeCputimeAdjust) {
  pystrobe_task_counters raw = {};
  raw.runtime_ns = 2'000'000'000;
  raw.utime_ns = 300'000'000;
  raw.stime_ns = 100'000'000;
  TaskFigures f = FiguresFrom(raw);
  EXPECT_DOUBLE_EQ(f.cpu_user_seconds, 1.5);
  EXPECT_DOUBLE_EQ(f.cpu_system_seconds, 0.5);
}

TEST(FiguresFrom, NoTickInWindowCountsAsUserTime) {
  pystrobe_task_counters raw = {};
  raw.runtime_ns = 3'000'000;
  TaskFigures f = FiguresFrom(raw);
  EXPECT_DOUBLE_EQ(f.cpu_user_seconds, 0.003);
  EXPECT_DOUBLE_EQ(f.cpu_system_seconds, 0);
}

TEST(CountersSince, SubtractsFieldByFieldAndNeverGoesNegative) {
  pystrobe_task_counters now = {}, before = {};
  now.read_bytes = 100;
  before.read_bytes = 40;
  now.minor_faults = 1;
  before.minor_faults = 5;
  pystrobe_task_counters d = CountersSince(now, before);
  EXPECT_EQ(d.read_bytes, 60u);
  EXPECT_EQ(d.minor_faults, 0u);
}

VerdictInputs Window(double cpu, double io, double runqueue, double sleep) {
  VerdictInputs in;
  in.duration_seconds = 10;
  in.cpus = 2;
  in.figures.cpu_user_seconds = cpu;
  in.figures.offcpu_io_seconds = io;
  in.figures.runqueue_seconds = runqueue;
  in.figures.offcpu_sleep_seconds = sleep;
  return in;
}

TEST(Decide, PureComputationIsCpuBound) {
  EXPECT_EQ(Decide(Window(9.5, 0, 0.3, 0)).name, "cpu-bound");
}

TEST(Decide, IoWaitAboveCpuIsIoBound) { EXPECT_EQ(Decide(Window(1, 6, 2, 0)).name, "io-bound"); }

TEST(Decide, RunQueueWaitAfterWakeupsIsChargedToWhatTheThreadWokeFrom) {
  VerdictInputs in = Window(0.5, 3, 6, 0);
  in.figures.preempted_seconds = 0.5;
  EXPECT_EQ(Decide(in).name, "io-bound");
  in.figures.preempted_seconds = 5;
  EXPECT_EQ(Decide(in).name, "cpu-starved");
}

TEST(Decide, MostlyAsleepIsLockOrSleepBound) {
  Verdict v = Decide(Window(0.1, 0, 0.05, 9.8));
  EXPECT_EQ(v.name, "lock-or-sleep-bound");
  EXPECT_EQ(v.bound, Bound::kSleep);
}

TEST(Decide, ManyFaultsWithKernelTimeIsMemoryBound) {
  VerdictInputs in = Window(1, 0, 0, 0);
  in.figures.cpu_system_seconds = 8;
  in.figures.minor_faults = 3'000'000;
  Verdict v = Decide(in);
  EXPECT_EQ(v.name, "memory-bound");
  EXPECT_THAT(v.evidence, HasSubstr("page faults per second"));
}

TEST(Decide, MajorFaultsAloneAreMemoryBound) {
  VerdictInputs in = Window(0.2, 5, 0, 0);
  in.figures.major_faults = 1000;
  EXPECT_EQ(Decide(in).name, "memory-bound");
}

TEST(Decide, MeasuredGilWaitAboveHalfTheCpuTimeIsGilBound) {
  // Four threads, two CPUs: one runs Python, three wait for the GIL.
  VerdictInputs in = Window(10, 0, 1, 29);
  in.figures.gil_wait_seconds = 28;
  in.gil_wait_measured = true;
  in.busy_threads = 4;
  in.python_samples = 1000;
  in.gil_samples = 990;
  Verdict v = Decide(in);
  EXPECT_EQ(v.name, "gil-bound");
  EXPECT_EQ(v.bound, Bound::kGil);
  EXPECT_THAT(v.evidence, HasSubstr("2.80 s per second for the GIL"));
  EXPECT_THAT(v.evidence, HasSubstr("99% of 1000 Python samples held the GIL"));
}

TEST(Decide, MeasuredLittleGilWaitOverridesTheSampleRule) {
  // Samples alone would say gil-bound; the measured wait says the threads
  // hardly waited.
  VerdictInputs in = Window(10.5, 0, 8, 20);
  in.figures.gil_wait_seconds = 0.1;
  in.gil_wait_measured = true;
  in.busy_threads = 4;
  in.python_samples = 1000;
  in.gil_samples = 950;
  EXPECT_EQ(Decide(in).name, "cpu-bound");
}

TEST(Decide, GilWaitBelowAQuarterOfTheWindowIsNotGilBound) {
  VerdictInputs in = Window(0.2, 0, 0, 9.5);
  in.figures.gil_wait_seconds = 2;  // 0.2 s per second
  in.gil_wait_measured = true;
  EXPECT_EQ(Decide(in).name, "lock-or-sleep-bound");
}

TEST(Decide, BusyPythonThreadsSharingOneGilAreGilBoundFromSamplesWhenWaitUnmeasured) {
  VerdictInputs in = Window(10.5, 0, 8, 20);
  in.busy_threads = 4;
  in.python_samples = 1000;
  in.gil_samples = 950;
  Verdict v = Decide(in);
  EXPECT_EQ(v.name, "gil-bound");
  EXPECT_THAT(v.evidence, HasSubstr("4 busy Python threads"));
}

TEST(Decide, ThreadsThatReleaseTheGilAreNotGilBound) {
  VerdictInputs in = Window(10.5, 0, 8, 20);
  in.busy_threads = 4;
  in.python_samples = 1000;
  in.gil_samples = 200;  // numpy-style: the work runs without the GIL
  EXPECT_EQ(Decide(in).name, "cpu-bound");
}

TEST(Decide, OneBusyThreadIsNeverGilBound) {
  VerdictInputs in = Window(9.8, 0, 0, 0);
  in.busy_threads = 1;
  in.python_samples = 1000;
  in.gil_samples = 1000;
  EXPECT_EQ(Decide(in).name, "cpu-bound");
}

// A training step: the CPU prepares a batch, then waits in CUDA's synchronize
// (spinning on the CPU, so the kernel counts it as CPU time).
VerdictInputs TrainingWindow(double gpu_busy, double spin, double work) {
  VerdictInputs in = Window(spin + work, 0, 0.1, 0.2);
  in.uses_gpu = true;
  in.gpu_busy_share = gpu_busy;
  in.gpu_wait_oncpu_seconds = spin;
  return in;
}

TEST(Decide, BusyGpuWithTheCpuMostlySpinningInItsWaitsIsGpuBound) {
  Verdict v = Decide(TrainingWindow(0.74, 8, 1.9));
  EXPECT_EQ(v.name, "gpu-bound");
  EXPECT_EQ(v.bound, Bound::kGpu);
  EXPECT_THAT(v.evidence, HasSubstr("74%"));
}

TEST(Decide, BusyGpuAsleepInCudaWaitsIsGpuBound) {
  VerdictInputs in = TrainingWindow(0.8, 0, 0.3);
  in.gpu_wait_offcpu_seconds = 9;
  in.figures.offcpu_sleep_seconds = 9.2;
  EXPECT_EQ(Decide(in).name, "gpu-bound");
}

TEST(Decide, SaturatedGpuIsGpuBoundWhateverTheCpuDoes) {
  EXPECT_EQ(Decide(TrainingWindow(0.95, 0, 9.5)).name, "gpu-bound");
}

TEST(Decide, IdleGpuWhileTheCpuPreparesBatchesIsGpuStarved) {
  Verdict v = Decide(TrainingWindow(0.2, 1, 8));
  EXPECT_EQ(v.name, "gpu-starved");
  EXPECT_EQ(v.bound, Bound::kGpuStarved);
}

TEST(Decide, IdleGpuBehindTheDiskIsIoBoundNotGpuStarved) {
  VerdictInputs in = TrainingWindow(0.1, 0, 2);
  in.figures.offcpu_io_seconds = 7;
  EXPECT_EQ(Decide(in).name, "io-bound");
}

TEST(Decide, IdleGpuBehindAStarvedCpuIsGpuStarved) {
  // The feeder waits for a CPU more than it runs: its work still starves the GPU.
  VerdictInputs in = TrainingWindow(0.1, 0.3, 4);
  in.figures.runqueue_seconds = 5;
  in.figures.preempted_seconds = 5;
  EXPECT_EQ(Decide(in).name, "gpu-starved");
}

TEST(Decide, HalfBusyGpuWithLittleWaitIsNeitherGpuVerdict) {
  EXPECT_EQ(Decide(TrainingWindow(0.6, 1, 8)).name, "cpu-bound");
}

TEST(Decide, IdleGpuWithAnIdleCpuIsNotGpuStarved) {
  // Both idle: waiting on something else (here, sleeping).
  VerdictInputs in = TrainingWindow(0.1, 0, 0.2);
  in.figures.offcpu_sleep_seconds = 9.5;
  EXPECT_EQ(Decide(in).name, "lock-or-sleep-bound");
}

TEST(Decide, WithoutNvmlTheGpuRulesNeverApplyButSpinningIsNotCpuWork) {
  VerdictInputs in = TrainingWindow(0.95, 9, 0.5);
  in.uses_gpu = false;
  in.figures.offcpu_sleep_seconds = 0.3;
  Verdict v = Decide(in);
  // 9.5 s of CPU, 9 of them spinning in cuCtxSynchronize: not cpu-bound.
  EXPECT_EQ(v.name, "lock-or-sleep-bound");
  EXPECT_THAT(v.evidence, HasSubstr("spinning in CUDA waits left out"));
}

Profile GpuProfiles(Profile& offcpu) {
  Profile oncpu;
  oncpu.Add({{"train (42)", FrameKind::kProcess},
             {"step (t.py:9)", FrameKind::kPython},
             {"synchronize (torch/cuda/__init__.py:801)", FrameKind::kPython},
             {"[gpu wait]", FrameKind::kMarker}},
            700, 7'000'000'000);
  oncpu.Add({{"train (42)", FrameKind::kProcess},
             {"step (t.py:9)", FrameKind::kPython},
             {"prepare_batch (t.py:3)", FrameKind::kPython}},
            200, 2'000'000'000);
  oncpu.Add({{"other (43)", FrameKind::kProcess}, {"[gpu wait]", FrameKind::kMarker}}, 50,
            500'000'000);
  offcpu.Add({{"train (42)", FrameKind::kProcess},
              {"step (t.py:9)", FrameKind::kPython},
              {"[gpu wait]", FrameKind::kMarker}},
             250'000, 0);  // microseconds
  return oncpu;
}

TEST(MeasureGpuWait, CountsTheProcesssStacksEndingInGpuWaitOnAndOffCpu) {
  Profile offcpu;
  Profile oncpu = GpuProfiles(offcpu);
  StatReport report;
  report.pid = 42;
  MeasureGpuWait(oncpu, offcpu, report);
  EXPECT_DOUBLE_EQ(report.gpu_wait_oncpu_seconds, 7.0);
  EXPECT_DOUBLE_EQ(report.gpu_wait_offcpu_seconds, 0.25);
}

TEST(PickStatStacks, GpuBoundShowsTheWaitsGpuStarvedTheWorkOutsideThem) {
  Profile offcpu;
  Profile oncpu = GpuProfiles(offcpu);
  StatReport bound;
  bound.pid = 42;
  bound.verdict = Verdict{.name = "gpu-bound", .evidence = "", .bound = Bound::kGpu};
  PickStatStacks(oncpu, offcpu, "", bound);
  ASSERT_EQ(bound.stacks.size(), 1u);
  EXPECT_EQ(bound.stacks[0].frames.back(), "[gpu wait]");
  EXPECT_EQ(bound.stacks_kind, "on-CPU samples ending in [gpu wait]");

  StatReport starved;
  starved.pid = 42;
  starved.verdict = Verdict{.name = "gpu-starved", .evidence = "", .bound = Bound::kGpuStarved};
  PickStatStacks(oncpu, offcpu, "", starved);
  ASSERT_EQ(starved.stacks.size(), 1u);
  EXPECT_EQ(starved.stacks[0].frames.back(), "prepare_batch (t.py:3)");
  EXPECT_EQ(starved.stacks_kind, "on-CPU samples outside [gpu wait]");
}

TEST(StatReportJson, GpuFiguresOnlyWhereNvmlIsWithTheProcesssShareOfEachDevice) {
  StatReport report;
  report.pid = 42;
  report.gpu_wait_oncpu_seconds = 1.5;
  report.figures.cpu_user_seconds = 2;
  std::string without = StatReportJson(report);
  EXPECT_THAT(without, HasSubstr("\"gpu_wait_seconds\":1.500000"));
  EXPECT_THAT(without, HasSubstr("\"cpu_work_seconds\":0.500000"));
  EXPECT_THAT(without, Not(HasSubstr("gpu_utilization")));
  EXPECT_THAT(StatReportText(report), Not(HasSubstr("GPU (this process)")));

  report.gpu_measured = true;
  report.gpu_devices = {GpuDeviceFigures{.index = 0,
                                         .name = "NVIDIA H100",
                                         .utilization = 0.75,
                                         .memory_used_peak_bytes = 2000,
                                         .memory_total_bytes = 8000},
                        GpuDeviceFigures{.index = 1, .name = "NVIDIA H100"}};
  report.gpu = GpuProcessFigures{
      .utilization = 0.74,
      .memory_bytes = 1000,
      .memory_peak_bytes = 1400,
      .devices = {GpuProcessDevice{.index = 0, .utilization = 0.74, .memory_peak_bytes = 1400}}};
  std::string json = StatReportJson(report);
  for (const char* field :
       {"\"gpu_utilization\":0.7400", "\"gpu_memory_peak_bytes\":1400", "\"gpu_memory_bytes\":1000",
        "{\"index\":0,\"name\":\"NVIDIA H100\",\"utilization\":0.7500,"
        "\"memory_used_peak_bytes\":2000,\"memory_total_bytes\":8000,"
        "\"process_utilization\":0.7400,\"process_memory_peak_bytes\":1400}",
        "\"process_utilization\":null"}) {
    EXPECT_THAT(json, HasSubstr(field));
  }
  std::string text = StatReportText(report);
  EXPECT_THAT(text, HasSubstr("74.0% utilization"));
  EXPECT_THAT(text, HasSubstr("GPU 0"));
  EXPECT_THAT(text, HasSubstr("GPU wait"));
}

TEST(StatReportJson, HasTheIssuesFields) {
  StatReport report;
  report.pid = 42;
  report.comm = "py\"thon";
  report.duration_seconds = 1.5;
  report.figures.read_bytes = 7;
  report.figures.gil_wait_seconds = 0.25;
  report.figures.block_io_bytes = 4096;
  report.gil_wait_measured = true;
  report.verdict = Verdict{.name = "cpu-bound", .evidence = "why", .bound = Bound::kCpu};
  report.stacks.push_back(ReportStack{.frames = {"a", "b"}, .samples = 3, .share = 0.5});
  std::string json = StatReportJson(report);
  for (const char* field : {"\"pid\":42",
                            "\"comm\":\"py\\\"thon\"",
                            "\"duration_seconds\":1.5",
                            "\"cpu_user_seconds\"",
                            "\"cpu_system_seconds\"",
                            "\"runqueue_seconds\"",
                            "\"offcpu_io_seconds\"",
                            "\"offcpu_sleep_seconds\"",
                            "\"gil_wait_seconds\":0.250000",
                            "\"gil_wait_measured\":true",
                            "\"gil_held_sample_share\":null",
                            "\"read_bytes\":7",
                            "\"write_bytes\"",
                            "\"read_calls\"",
                            "\"write_calls\"",
                            "\"block_io_bytes\":4096",
                            "\"read_blocked_seconds\"",
                            "\"minor_faults\"",
                            "\"major_faults\"",
                            "\"context_switches\"",
                            "\"gc_seconds\"",
                            "\"threads\"",
                            "\"verdict\":\"cpu-bound\"",
                            "\"evidence\":\"why\"",
                            "\"frames\":[\"a\",\"b\"]"}) {
    EXPECT_THAT(json, HasSubstr(field));
  }
  EXPECT_THAT(json, Not(HasSubstr("\"syscalls\"")));
  report.syscalls = true;
  report.figures.sys_read_calls = 9;
  EXPECT_THAT(StatReportJson(report), HasSubstr("\"syscalls\":{\"read_calls\":9,"));
}

TEST(StatReportText, OffCpuStacksShowTheirTime) {
  StatReport report;
  report.stacks_kind = "off-CPU time ending in [io wait]";
  report.stacks.push_back(
      ReportStack{.frames = {"io (w.py:3)", "[io wait]"}, .seconds = 1.25, .share = 0.9});
  std::string text = StatReportText(report);
  EXPECT_THAT(text, HasSubstr("top stacks (off-CPU time ending in [io wait])"));
  EXPECT_THAT(text, HasSubstr("90.0%    1.250 s  io (w.py:3);[io wait]"));
}

TEST(RenderTopScreen, SortsByTheChosenKey) {
  TopScreen screen;
  TopRow cpu_hog, writer;
  cpu_hog.pid = 1;
  cpu_hog.comm = "hog";
  cpu_hog.figures.cpu_user_seconds = 0.9;
  writer.pid = 2;
  writer.comm = "writer";
  writer.figures.cpu_user_seconds = 0.1;
  writer.figures.write_bytes = 1 << 20;
  screen.rows = {writer, cpu_hog};
  screen.sort = TopSort::kCpu;
  std::string by_cpu = RenderTopScreen(screen);
  EXPECT_LT(by_cpu.find(" hog"), by_cpu.find(" writer"));
  screen.sort = TopSort::kIo;
  std::string by_io = RenderTopScreen(screen);
  EXPECT_LT(by_io.find(" writer"), by_io.find(" hog"));
  EXPECT_THAT(by_io, HasSubstr("1.0M"));
}

TEST(RenderTopScreen, ShowsBlockIoGilWaitAndGcPerRow) {
  TopScreen screen;
  TopRow row;
  row.pid = 7;
  row.comm = "py";
  row.figures.block_io_bytes = 2 << 20;
  row.figures.gil_wait_seconds = 0.5;
  row.figures.gc_seconds = 0.125;
  screen.rows = {row};
  std::string text = RenderTopScreen(screen);
  EXPECT_THAT(text, HasSubstr("BIO/s"));
  EXPECT_THAT(text, HasSubstr("GC%"));
  EXPECT_THAT(text, HasSubstr("2.1M"));
  EXPECT_THAT(text, HasSubstr(" 50.0  12.5 "));
  EXPECT_THAT(text, HasSubstr("GIL wait 50.0%, GC 12.5%"));
}

TEST(RenderTopScreen, AFreeThreadedCPythonsGilColumnIsADash) {
  TopScreen screen;
  TopRow free_threaded, with_gil;
  free_threaded.pid = 7;
  free_threaded.comm = "python3.13t";
  free_threaded.free_threaded = true;
  free_threaded.figures.gc_seconds = 0.125;
  with_gil.pid = 8;
  with_gil.comm = "python3.11";
  with_gil.figures.gc_seconds = 0.125;
  screen.rows = {free_threaded, with_gil};
  std::string text = RenderTopScreen(screen);
  EXPECT_THAT(text, HasSubstr("python3.13t"));
  EXPECT_THAT(text, HasSubstr("     -  12.5 "));
  EXPECT_THAT(text, HasSubstr("   0.0  12.5 "));
}

TEST(RenderTopScreen, GpuColumnsOnlyWhereNvmlIsAndADashForProcessesItDidNotList) {
  TopScreen screen;
  TopRow trainer;
  trainer.pid = 7;
  trainer.comm = "train";
  trainer.figures.cpu_user_seconds = 0.9;
  trainer.gpu.emplace();
  trainer.gpu->utilization = 0.74;
  trainer.gpu->memory_bytes = 1'300'000'000;
  TopRow shell;
  shell.pid = 8;
  shell.comm = "sh";
  screen.rows = {trainer, shell};
  EXPECT_THAT(RenderTopScreen(screen), Not(HasSubstr("GPU%")));
  screen.gpu = true;
  screen.gpu_devices = {GpuDeviceFigures{.index = 0,
                                         .name = "NVIDIA H100",
                                         .utilization = 0.8,
                                         .memory_used_bytes = 2'000'000'000,
                                         .memory_total_bytes = 80'000'000'000}};
  std::string text = RenderTopScreen(screen);
  EXPECT_THAT(text, HasSubstr("GPU%  GPUMEM"));
  EXPECT_THAT(text, HasSubstr("   74.0    1.3G"));
  EXPECT_THAT(text, HasSubstr("      -       -"));
  EXPECT_THAT(text, HasSubstr("GPU 0 NVIDIA H100: 80.0% busy, memory 2.0GB of 80.0GB"));
}

// ---- Resident memory -------------------------------------------------------

ResidentMemory Resident(uint64_t anon, uint64_t read_ns = 1) {
  return ResidentMemory{.anon_bytes = anon, .file_bytes = 10, .read_ns = read_ns};
}

TEST(MemoryTimeline, TakesAPointPerIntervalAndForcedOnesAnyTime) {
  MemoryTimeline timeline(/*start_ns=*/1'000'000'000, /*interval_ns=*/100);
  timeline.Observe(Resident(5), 1'000'000'000);
  timeline.Observe(Resident(6), 1'000'000'050);  // not due
  timeline.Observe(Resident(7), 1'000'000'100);
  timeline.Observe(Resident(8), 1'000'000'120, /*force=*/true);
  ASSERT_EQ(timeline.points().size(), 3u);
  EXPECT_EQ(timeline.points()[1].resident_bytes, 17u);
  EXPECT_EQ(timeline.points()[2].anon_bytes, 8u);
  EXPECT_DOUBLE_EQ(timeline.points()[0].seconds, 0);
}

TEST(MemoryTimeline, MemoryTheKernelNeverReadIsNoPoint) {
  MemoryTimeline timeline(0, 1);
  timeline.Observe(Resident(5, /*read_ns=*/0), 10);
  timeline.Observe(ResidentMemory{.read_ns = 3}, 20);  // between fork and exec: nothing resident
  EXPECT_TRUE(timeline.points().empty());
}

TEST(MemoryTimeline, ALongRunIsThinnedKeepingTheFirstAndTheLastPoint) {
  MemoryTimeline timeline(0, /*interval_ns=*/10, /*max_points=*/8);
  for (uint64_t i = 0; i < 100; ++i) timeline.Observe(Resident(i + 1), i * 10);
  EXPECT_LE(timeline.points().size(), 8u);
  EXPECT_GE(timeline.points().size(), 4u);
  EXPECT_EQ(timeline.points().front().anon_bytes, 1u);
  for (size_t i = 1; i < timeline.points().size(); ++i) {
    EXPECT_GT(timeline.points()[i].seconds, timeline.points()[i - 1].seconds);
  }
}

TEST(StatReportJson, MemoryFiguresPeakTimelineAndGrowthStacks) {
  StatReport report;
  report.memory = ResidentMemory{.anon_bytes = 100,
                                 .file_bytes = 20,
                                 .shmem_bytes = 3,
                                 .swap_bytes = 4,
                                 .peak_bytes = 500,
                                 .peak_ns = 9,
                                 .read_ns = 10};
  report.peak_seconds = 1.25;
  report.memory_timeline = {{.seconds = 0.5, .resident_bytes = 123, .anon_bytes = 100}};
  report.memory_growth_sampled = true;
  report.memory_growth_bytes = 300;
  report.memory_growth_stacks = {{.frames = {"main", "grow"}, .bytes = 300, .share = 1}};
  std::string json = StatReportJson(report);
  for (const char* field :
       {"\"rss_bytes\":123", "\"rss_anon_bytes\":100", "\"rss_file_bytes\":20",
        "\"rss_shmem_bytes\":3", "\"swap_bytes\":4", "\"peak_rss_bytes\":500",
        "\"peak_rss_seconds\":1.250",
        "\"memory_timeline\":[{\"seconds\":0.500,\"rss_bytes\":123,\"anon_bytes\":100,",
        "\"oom_killed\":false",
        "\"memory_growth_stacks\":[{\"stack\":[\"main\",\"grow\"],\"bytes\":300,"}) {
    EXPECT_THAT(json, HasSubstr(field));
  }
  EXPECT_THAT(StatReportText(report), HasSubstr("peak resident 500 B, first seen at 1.25 s"));
}

TEST(StatReportJson, MemoryNeverReadIsNullNotZero) {
  std::string json = StatReportJson(StatReport{});
  EXPECT_THAT(json, HasSubstr("\"peak_rss_bytes\":null"));
  EXPECT_THAT(json, HasSubstr("\"memory_timeline\":[]"));
}

TEST(RenderTopScreen, ProcessRowsShowRssAndItsGrowthAndSortByIt) {
  TopScreen screen;
  screen.sort = TopSort::kMemory;
  TopRow small;
  small.pid = 1;
  small.comm = "small";
  small.rss_known = true;
  small.rss_bytes = 5'000'000;
  TopRow big = small;
  big.pid = 2;
  big.comm = "big";
  big.rss_bytes = 3'000'000'000;
  big.rss_growth_known = true;
  big.rss_growth_per_second = 40e6;
  screen.rows = {small, big};
  std::string text = RenderTopScreen(screen);
  EXPECT_THAT(text, HasSubstr("RSS/s"));
  EXPECT_LT(text.find(" big "), text.find(" small "));
  EXPECT_THAT(text, HasSubstr("3.0G   +40.0M"));
  EXPECT_THAT(text, HasSubstr("5.0M        -"));
  EXPECT_EQ(TopSortForKey('m'), TopSort::kMemory);
}

TEST(PickMemoryGrowthStacks, TheProcesssStacksHeaviestFirstAndAMemoryVerdictNamesTheTop) {
  Profile growth;
  auto frames = [](const char* process, const char* leaf) {
    return std::vector<Frame>{{process, FrameKind::kProcess},
                              {"main (app.py:1)", FrameKind::kPython},
                              {leaf, FrameKind::kPython}};
  };
  growth.Add(frames("python3 (7)", "grow_small (app.py:9)"), 1 << 20);
  growth.Add(frames("python3 (7)", "grow_big (app.py:5)"), 3 << 20);
  growth.Add(frames("other (8)", "grow_big (app.py:5)"), 9 << 20);
  StatReport report;
  report.pid = 7;
  report.verdict = Verdict{.name = "memory-bound", .evidence = "faults", .bound = Bound::kMemory};
  PickMemoryGrowthStacks(growth, report);
  ASSERT_EQ(report.memory_growth_stacks.size(), 2u);
  EXPECT_EQ(report.memory_growth_bytes, 4u << 20);
  EXPECT_THAT(report.memory_growth_stacks[0].frames,
              ElementsAre("main (app.py:1)", "grow_big (app.py:5)"));
  EXPECT_DOUBLE_EQ(report.memory_growth_stacks[0].share, 0.75);
  EXPECT_EQ(report.memory_growth_stacks[1].bytes, 1u << 20);
  EXPECT_THAT(report.verdict.evidence,
              HasSubstr("resident memory grew 4.0 MiB up to its peak, 75% of it in grow_big"));
}

TEST(PickAllocationSites, PythonLinesOrTheNativeCallerOfTheAllocatorWithTheirShares) {
  auto module = [](const char* path) {
    auto module = std::make_shared<NativeModule>();
    module->path = path;
    return module;
  };
  auto libc = module("/lib/x86_64/libc.so.6");
  auto sampler = module("/opt/pystrobe/libpystrobe-alloc.so");
  auto python = [](const char* process, const char* leaf) {
    return std::vector<Frame>{{process, FrameKind::kProcess},
                              {"main (app.py:1)", FrameKind::kPython},
                              {leaf, FrameKind::kPython}};
  };
  std::vector<Frame> native = {{"leaky (9)", FrameKind::kProcess},
                               {"leak_into", FrameKind::kNative},
                               {"strdup", FrameKind::kNative, libc},
                               {"malloc", FrameKind::kNative, sampler},
                               {"pystrobe_alloc_sampled", FrameKind::kNative, sampler}};
  Profile allocated, in_use;
  allocated.Add(python("python3 (7)", "churn (app.py:9)"), 6 << 20);
  allocated.Add(python("python3 (7)", "hold (app.py:5)"), 2 << 20);
  allocated.Add(python("other (8)", "hold (app.py:5)"), 9 << 20);
  in_use.Add(python("python3 (7)", "hold (app.py:5)"), 2 << 20);
  AllocationFigures figures;
  PickAllocationSites(allocated, in_use, 7, figures);
  EXPECT_EQ(figures.allocated_bytes, 8u << 20);
  EXPECT_EQ(figures.in_use_bytes, 2u << 20);
  ASSERT_EQ(figures.sites.size(), 2u);
  EXPECT_EQ(figures.sites[0].frame, "churn (app.py:9)");
  EXPECT_DOUBLE_EQ(figures.sites[0].allocated_share, 0.75);
  EXPECT_EQ(figures.sites[0].in_use_bytes, 0u);
  EXPECT_EQ(figures.sites[1].frame, "hold (app.py:5)");
  EXPECT_DOUBLE_EQ(figures.sites[1].in_use_share, 1.0);

  Profile c_program;
  c_program.Add(native, 1 << 20);
  AllocationFigures c_figures;
  PickAllocationSites(c_program, Profile(), 9, c_figures);
  ASSERT_EQ(c_figures.sites.size(), 1u);
  EXPECT_EQ(c_figures.sites[0].frame, "leak_into");
}

TEST(PickAllocationSites, ASiteAmongTheMostHeldStaysBesideTheMostAllocated) {
  Profile allocated, in_use;
  for (int i = 0; i < 20; ++i) {
    std::string leaf = absl::StrCat("churn", i, " (app.py:", i, ")");
    allocated.Add({{"python3 (7)", FrameKind::kProcess}, {leaf, FrameKind::kPython}}, (100 + i)
                                                                                          << 20);
  }
  std::vector<Frame> leak = {{"python3 (7)", FrameKind::kProcess},
                             {"leak (app.py:99)", FrameKind::kPython}};
  allocated.Add(leak, 1 << 20);
  in_use.Add(leak, 1 << 20);
  AllocationFigures figures;
  PickAllocationSites(allocated, in_use, 7, figures);
  ASSERT_EQ(figures.sites.size(), kAllocationSites + 1);
  EXPECT_EQ(figures.sites.front().frame, "churn19 (app.py:19)");
  EXPECT_EQ(figures.sites.back().frame, "leak (app.py:99)");
  EXPECT_DOUBLE_EQ(figures.sites.back().in_use_share, 1.0);
}

TEST(StatReport, AllocationsOnlyWhenAskedForInTextAndJson) {
  StatReport report;
  EXPECT_THAT(StatReportJson(report), Not(HasSubstr("\"allocations\"")));
  EXPECT_THAT(StatReportText(report), Not(HasSubstr("allocations:")));
  AllocationFigures figures;
  figures.in_process = true;
  figures.sample_bytes = 512 * 1024;
  figures.samples = 400;
  figures.frees = 10;
  figures.allocated_bytes = 200 << 20;
  figures.in_use_bytes = 100 << 20;
  figures.in_use_moment = "when Python finalization began";
  figures.sites = {{.frame = "hold (app.py:5)",
                    .allocated_bytes = 100 << 20,
                    .allocated_share = 0.5,
                    .in_use_bytes = 100 << 20,
                    .in_use_share = 1}};
  report.allocations = figures;
  std::string json = StatReportJson(report);
  for (const char* field :
       {"\"allocations\":{\"sampler\":\"in-process\",\"sample_bytes\":524288,\"samples\":400,"
        "\"frees\":10,\"untracked\":0,\"records_lost\":0,\"allocated_bytes\":209715200,"
        "\"in_use_bytes\":104857600,\"in_use_moment\":\"when Python finalization began\",",
        "\"sites\":[{\"frame\":\"hold (app.py:5)\",\"allocated_bytes\":104857600,"
        "\"allocated_share\":0.5000,\"in_use_bytes\":104857600,\"in_use_share\":1.0000}]"}) {
    EXPECT_THAT(json, HasSubstr(field));
  }
  // Text: the estimates, when the in-use view was taken, and each site's
  // share of what was allocated and of what is still held.
  for (const char* line : {"allocations: sampled every 512.00 KiB on average, in the process",
                           "still in use", "held when Python finalization began",
                           "50.0% 100.00 MiB  100.0% 100.00 MiB  hold (app.py:5)"}) {
    EXPECT_THAT(StatReportText(report), HasSubstr(line));
  }
}

TEST(VmRssBytes, ReadsTheStatusLineInKib) {
  EXPECT_EQ(VmRssBytes("Name:\tpython3\nVmHWM:\t  9000 kB\nVmRSS:\t   51236 kB\nRssAnon:\t1 kB\n"),
            51236u * 1024);
  EXPECT_EQ(VmRssBytes("Name:\tkthreadd\nState:\tS (sleeping)\n"), std::nullopt);
  EXPECT_EQ(VmRssBytes("VmRSS:\t12 pages\n"), std::nullopt);
}

TEST(MergeThreadViews, AProcessAsleepSinceAccountingStartedIsShownFromProc) {
  ProcProcess proc{.comm = "python3",
                   .resident_bytes = 50u << 20,
                   .threads = {{.pid = 7, .tid = 7, .comm = "python3"},
                               {.pid = 7, .tid = 8, .comm = "sleeper"}}};
  PerThreadView view = MergeThreadViews({}, {}, proc);
  EXPECT_EQ(view.comm, "python3");
  EXPECT_EQ(view.resident_bytes, 50u << 20);
  ASSERT_EQ(view.threads.size(), 2u);
  EXPECT_EQ(view.threads[1].comm, "sleeper");
  EXPECT_EQ(view.threads[1].raw.runtime_ns, 0u);
  EXPECT_EQ(PerThreadTitle(7, view), "pid 7 (python3), per thread");
}

TEST(MergeThreadViews, TheAccountingsFiguresComeFirstThenTheThreadsOnlyProcKnows) {
  ProcessCounters counted;
  counted.pid = 7;
  counted.comm = "worker";
  counted.memory.anon_bytes = 3u << 20;
  counted.memory.read_ns = 1;
  ThreadCounters ran{.pid = 7, .tid = 8, .comm = "spinner"};
  ran.raw.runtime_ns = 5'000'000;
  // What ReadProcProcess gives with the accounted tid 8 known.
  ProcProcess proc{.comm = "python3",
                   .resident_bytes = 50u << 20,
                   .threads = {{.pid = 7, .tid = 7, .comm = "python3"}}};
  PerThreadView view = MergeThreadViews({counted}, {ran}, proc);
  EXPECT_EQ(view.comm, "worker");
  EXPECT_EQ(view.resident_bytes, 3u << 20);
  ASSERT_EQ(view.threads.size(), 2u);
  EXPECT_EQ(view.threads[0].tid, 8u);
  EXPECT_EQ(view.threads[0].raw.runtime_ns, 5'000'000u);
  EXPECT_EQ(view.threads[1].tid, 7u);

  // Gone from /proc and never counted: a title without a name, no memory.
  PerThreadView gone = MergeThreadViews({}, {}, ProcProcess{});
  EXPECT_EQ(PerThreadTitle(9, gone), "pid 9, per thread");
  EXPECT_EQ(gone.resident_bytes, std::nullopt);
}

TEST(ReadProcProcess, ReadsThisProcessWithoutTheThreadsAlreadyKnown) {
  const uint32_t pid = static_cast<uint32_t>(getpid());
  const uint32_t tid = static_cast<uint32_t>(gettid());
  // A second thread that lives until both reads are done.
  std::promise<void> read;
  std::thread other([done = read.get_future()]() mutable { done.wait(); });
  ProcProcess all = ReadProcProcess(pid, {});
  ProcProcess unknown = ReadProcProcess(pid, {tid});
  read.set_value();
  other.join();
  EXPECT_FALSE(all.comm.empty());
  ASSERT_TRUE(all.resident_bytes.has_value());
  EXPECT_GT(*all.resident_bytes, 0u);
  EXPECT_EQ(all.threads.size(), unknown.threads.size() + 1);
  for (const ThreadCounters& thread : unknown.threads) EXPECT_NE(thread.tid, tid);
}

TEST(RenderTopScreen, APerThreadScreenSumsTheProcesssResidentBytesNotItsRows) {
  TopScreen screen;
  screen.title = "pid 7 (python3), per thread";
  TopRow row;
  row.pid = 7;
  row.tid = 7;
  row.comm = "python3";
  screen.rows.push_back(row);
  screen.resident_bytes = 50u << 20;
  EXPECT_THAT(RenderTopScreen(screen), HasSubstr("resident 52.4MB"));
}

// A sample record of `kind` as the kernel writes it (no frames), decoded.
RingRecord DecodedSample(uint32_t kind, uint32_t pid, uint32_t tid, uint32_t flags,
                         uint16_t python_status) {
  pystrobe_sample sample = {};
  sample.kind = kind;
  sample.pid = pid;
  sample.tid = tid;
  sample.flags = flags;
  sample.python_status = python_status;
  absl::StatusOr<RingRecord> record = DecodeRingRecord(
      std::span(reinterpret_cast<const uint8_t*>(&sample), offsetof(pystrobe_sample, data)));
  EXPECT_TRUE(record.ok()) << record.status();
  return record.ok() ? *record : RingRecord{};
}

TEST(SampleTally, CountsOnCpuSamplesPerProcessAndThreadWithTheirGilShare) {
  SampleTally tally;
  tally.Observe(
      DecodedSample(PYSTROBE_EVENT_SAMPLE, 10, 11, PYSTROBE_SAMPLE_HOLDS_GIL, PYSTROBE_PY_WALKED));
  tally.Observe(DecodedSample(PYSTROBE_EVENT_SAMPLE, 10, 11, 0, PYSTROBE_PY_WALKED));
  tally.Observe(DecodedSample(PYSTROBE_EVENT_SAMPLE, 10, 12, 0, PYSTROBE_PY_NO_THREAD_STATE));
  tally.Observe(DecodedSample(PYSTROBE_EVENT_SAMPLE, 20, 20, PYSTROBE_SAMPLE_FREE_THREADED,
                              PYSTROBE_PY_WALKED));
  const ProcessSamples* ten = tally.Of(10);
  ASSERT_NE(ten, nullptr);
  EXPECT_EQ(ten->samples, 3u);
  EXPECT_EQ(ten->python_samples, 2u);
  EXPECT_EQ(ten->gil_samples, 1u);
  EXPECT_EQ(ten->free_threaded_samples, 0u);
  EXPECT_EQ(ten->per_thread.at(11), 2u);
  EXPECT_EQ(ten->per_thread.at(12), 1u);
  const ProcessSamples* twenty = tally.Of(20);
  ASSERT_NE(twenty, nullptr);
  EXPECT_EQ(twenty->free_threaded_samples, 1u);
  EXPECT_EQ(tally.Of(30), nullptr);
  tally.Clear();
  EXPECT_EQ(tally.Of(10), nullptr);
}

TEST(SampleTally, RecordsThatAreNotOnCpuSamplesAreNotCounted) {
  SampleTally tally;
  for (uint32_t kind : {PYSTROBE_EVENT_OFFCPU, PYSTROBE_EVENT_MEMORY, PYSTROBE_EVENT_ALLOC,
                        PYSTROBE_EVENT_OOM_KILLED}) {
    tally.Observe(DecodedSample(kind, 10, 11, PYSTROBE_SAMPLE_HOLDS_GIL, PYSTROBE_PY_WALKED));
  }
  ProcessEventRecord exec;
  exec.kind = PYSTROBE_EVENT_EXEC;
  exec.pid = 10;
  tally.Observe(exec);
  tally.Observe(FreeRecord{.pid = 10, .address = 0x1000});
  tally.Observe(FinalizeRecord{.pid = 10});
  EXPECT_EQ(tally.Of(10), nullptr);
}

}  // namespace
}  // namespace pystrobe

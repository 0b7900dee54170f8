#include "daemon/reports/recording_reader.h"

#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "daemon/reports/flat_report.h"
#include "exporters/pprof_writer.h"
#include "exporters/profile_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/profile.h"

namespace pystrobe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Samples per frame name, each frame once per stack, of one sample type.
std::map<std::string, int64_t> TotalsByFrame(const Recording& recording, size_t type) {
  std::map<std::string, int64_t> totals;
  for (const RecordedStack& stack : recording.stacks) {
    std::map<std::string, bool> seen;
    for (size_t index : stack.frames) {
      std::string name = FrameDisplayName(recording.frames[index]);
      if (!seen[name]) totals[name] += stack.values[type];
      seen[name] = true;
    }
  }
  return totals;
}

std::vector<std::string> StackNames(const Recording& recording, size_t stack) {
  std::vector<std::string> names;
  for (size_t index : recording.stacks[stack].frames) {
    names.push_back(FrameDisplayName(recording.frames[index]));
  }
  return names;
}

// A profile as record writes it: process and thread frames at the root,
// Python frames, a kernel leaf, an unsymbolized native frame.
Profile TwoThreadProfile() {
  Profile profile;
  profile.sample_rate_hz = 100;
  auto module = std::make_shared<NativeModule>();
  module->path = "/usr/lib/libfoo.so";
  profile.Add({{"python3 (42)", FrameKind::kProcess},
               {"MainThread tid=42", FrameKind::kThread},
               {"<module> (app.py:10)", FrameKind::kPython},
               {"work (app.py:3)", FrameKind::kPython}},
              30);
  profile.Add({{"python3 (42)", FrameKind::kProcess},
               {"worker tid=43", FrameKind::kThread},
               {"<module> (app.py:10)", FrameKind::kPython},
               {"Outer.rest (lib/util.py:7)", FrameKind::kPython},
               {"schedule_[k]", FrameKind::kKernel}},
              10);
  profile.Add({{"python3 (42)", FrameKind::kProcess},
               {"MainThread tid=42", FrameKind::kThread},
               {"libfoo.so+0x1a2b", FrameKind::kNative, module, 0x1a2b}},
              5);
  return profile;
}

std::string Write(const Profile& profile, std::string_view format) {
  std::unique_ptr<ProfileWriter> writer = *MakeProfileWriter(format);
  std::ostringstream out;
  EXPECT_TRUE(writer->Write(profile, out).ok());
  return out.str();
}

TEST(RecordingReaderTest, FoldedDropsProcessAndThreadFramesAndSplitsPythonFrames) {
  absl::StatusOr<Recording> recording = ParseRecording(
      "python3 (42);MainThread tid=42;<module> (app.py:10);work (app.py:3) 30\n"
      "python3 (42);[native] 4\n",
      "x.folded");
  ASSERT_TRUE(recording.ok()) << recording.status();
  EXPECT_EQ(recording->format, "folded");
  ASSERT_EQ(recording->stacks.size(), 2u);
  EXPECT_THAT(StackNames(*recording, 0), ElementsAre("<module> (app.py:10)", "work (app.py:3)"));
  EXPECT_THAT(StackNames(*recording, 1), ElementsAre("[native]"));
  const RecordedFrame& work = recording->frames[recording->stacks[0].frames[1]];
  EXPECT_EQ(work.function, "work");
  EXPECT_EQ(work.file, "app.py");
  EXPECT_EQ(work.line, 3);
  EXPECT_EQ(recording->Total(0), 34);
}

TEST(RecordingReaderTest, ScriptWithoutExtensionIsAFileButACppSignatureIsNot) {
  absl::StatusOr<Recording> recording =
      ParseRecording("p (1);<module> (myscript);ns::f (int, char) 2\n", "x.folded");
  ASSERT_TRUE(recording.ok()) << recording.status();
  const RecordedFrame& module = recording->frames[recording->stacks[0].frames[0]];
  EXPECT_EQ(module.function, "<module>");
  EXPECT_EQ(module.file, "myscript");
  const RecordedFrame& native = recording->frames[recording->stacks[0].frames[1]];
  EXPECT_EQ(native.function, "ns::f (int, char)");
  EXPECT_EQ(native.file, "");
}

TEST(RecordingReaderTest, OffCpuRootsStayAboveTheDroppedProcessFrame) {
  absl::StatusOr<Recording> recording =
      ParseRecording("[off-cpu];python3 (42);f (a.py:1);[sleep] 700\n", "x.folded");
  ASSERT_TRUE(recording.ok()) << recording.status();
  EXPECT_THAT(StackNames(*recording, 0), ElementsAre("[off-cpu]", "f (a.py:1)", "[sleep]"));
  // Weighed in microseconds, as record --off-cpu writes them.
  EXPECT_EQ(recording->sample_types[0].type, "wall");
  EXPECT_EQ(recording->sample_types[0].unit, "microseconds");
}

TEST(RecordingReaderTest, EveryFormatReadsBackTheSameFunctions) {
  Profile profile = TwoThreadProfile();
  absl::StatusOr<Recording> folded = ParseRecording(Write(profile, "folded"), "p.folded");
  absl::StatusOr<Recording> pprof = ParseRecording(Write(profile, "pprof"), "p.pb.gz");
  absl::StatusOr<Recording> speedscope = ParseRecording(Write(profile, "speedscope"), "p.json");
  ASSERT_TRUE(folded.ok()) << folded.status();
  ASSERT_TRUE(pprof.ok()) << pprof.status();
  ASSERT_TRUE(speedscope.ok()) << speedscope.status();
  EXPECT_EQ(pprof->format, "pprof");
  EXPECT_EQ(speedscope->format, "speedscope");

  std::map<std::string, int64_t> want = {{"<module> (app.py:10)", 40},
                                         {"work (app.py:3)", 30},
                                         {"Outer.rest (lib/util.py:7)", 10},
                                         {"schedule_[k]", 10},
                                         {"libfoo.so+0x1a2b", 5}};
  EXPECT_EQ(TotalsByFrame(*folded, 0), want);
  EXPECT_EQ(TotalsByFrame(*speedscope, 0), want);
  absl::StatusOr<size_t> samples = pprof->SampleTypeIndex("samples");
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(TotalsByFrame(*pprof, *samples), want);
  // pprof's default is cpu time: 10 ms a sample at 100 Hz.
  EXPECT_EQ(pprof->sample_types[pprof->default_sample_type].type, "cpu");
  EXPECT_EQ(pprof->Total(pprof->default_sample_type), 45 * 10'000'000);
}

TEST(RecordingReaderTest, OtlpRequestReadsBackWhatItsPprofHolds) {
  Profile profile = TwoThreadProfile();
  absl::StatusOr<Recording> pprof = ParseRecording(Write(profile, "pprof"), "p.pb.gz");
  absl::StatusOr<Recording> otlp = ParseRecording(Write(profile, "otlp"), "p.otlp.pb");
  ASSERT_TRUE(pprof.ok()) << pprof.status();
  ASSERT_TRUE(otlp.ok()) << otlp.status();
  EXPECT_EQ(otlp->format, "otlp");
  for (std::string_view type : {"samples", "cpu"}) {
    absl::StatusOr<size_t> in_pprof = pprof->SampleTypeIndex(type);
    absl::StatusOr<size_t> in_otlp = otlp->SampleTypeIndex(type);
    ASSERT_TRUE(in_pprof.ok() && in_otlp.ok()) << type;
    EXPECT_EQ(TotalsByFrame(*otlp, *in_otlp), TotalsByFrame(*pprof, *in_pprof)) << type;
  }
  EXPECT_EQ(otlp->sample_types[otlp->default_sample_type].type, "cpu");
}

TEST(RecordingReaderTest, TimedStacksReadAsTheTimeTheyStandFor) {
  // Samples of unequal intervals: speedscope weighs them in nanoseconds, pprof
  // gives them as cpu/nanoseconds; both read back the same CPU time.
  Profile profile;
  profile.sample_rate_hz = 100;
  profile.Add({{"python3 (42)", FrameKind::kProcess}, {"work (app.py:3)", FrameKind::kPython}}, 3,
              36'000'000);
  profile.Add({{"python3 (42)", FrameKind::kProcess}, {"rest (app.py:9)", FrameKind::kPython}}, 1,
              4'000'000);
  for (std::string_view format : {"pprof", "speedscope"}) {
    absl::StatusOr<Recording> recording = ParseRecording(Write(profile, format), format);
    ASSERT_TRUE(recording.ok()) << recording.status();
    absl::StatusOr<size_t> cpu = recording->SampleTypeIndex("cpu");
    ASSERT_TRUE(cpu.ok()) << format << ": " << cpu.status();
    EXPECT_EQ(recording->Total(*cpu), 40'000'000) << format;
    EXPECT_EQ(TotalsByFrame(*recording, *cpu)["work (app.py:3)"], 36'000'000) << format;
  }
}

TEST(RecordingReaderTest, OffCpuRecordingsAreWallTimeInEveryFormat) {
  Profile profile;
  profile.sample_rate_hz = 100;
  profile.count_unit = "microseconds";
  profile.Add({{"[on-cpu]", FrameKind::kMarker},
               {"python3 (42)", FrameKind::kProcess},
               {"work (app.py:3)", FrameKind::kPython}},
              30'000);
  profile.Add({{"[off-cpu]", FrameKind::kMarker},
               {"python3 (42)", FrameKind::kProcess},
               {"wait (app.py:9)", FrameKind::kPython},
               {"[sleep]", FrameKind::kMarker}},
              70'000);
  for (std::string_view format : {"folded", "pprof", "speedscope", "otlp"}) {
    absl::StatusOr<Recording> recording = ParseRecording(Write(profile, format), format);
    ASSERT_TRUE(recording.ok()) << recording.status();
    absl::StatusOr<size_t> wall = recording->SampleTypeIndex("wall");
    ASSERT_TRUE(wall.ok()) << format << ": " << wall.status();
    EXPECT_EQ(recording->sample_types[recording->default_sample_type].type, "wall") << format;
    int64_t scale = format == "pprof" || format == "otlp" ? 1000 : 1;  // nanoseconds there
    EXPECT_EQ(recording->Total(*wall), 100'000 * scale) << format;
    EXPECT_EQ(TotalsByFrame(*recording, *wall)["wait (app.py:9)"], 70'000 * scale) << format;
  }
}

// What a frame is survives every format: pprof by its mappings and files,
// folded and speedscope by pystrobe's names; so a line's columns agree.
TEST(RecordingReaderTest, EveryFormatGivesTheSameColumns) {
  auto python = std::make_shared<NativeModule>();
  python->path = "/usr/bin/python3.11";
  auto blas = std::make_shared<NativeModule>();
  blas->path = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3";
  auto kernel = std::make_shared<NativeModule>();
  kernel->path = "[kernel]";
  Profile profile;
  profile.sample_rate_hz = 100;
  profile.count_unit = "microseconds";
  profile.Add({{"[on-cpu]", FrameKind::kMarker},
               {"python3 (42)", FrameKind::kProcess},
               {"<module> (mm.py:6)", FrameKind::kPython},
               {"python3.11+0x1f00", FrameKind::kNative, python, 0x1f00},
               {"dgemm_", FrameKind::kNative, blas, 0x400}},
              900);
  profile.Add({{"[on-cpu]", FrameKind::kMarker},
               {"python3 (42)", FrameKind::kProcess},
               {"<module> (mm.py:6)", FrameKind::kPython},
               {"list_sort_impl", FrameKind::kNative, python, 0x2f00}},
              50);
  profile.Add({{"[on-cpu]", FrameKind::kMarker},
               {"python3 (42)", FrameKind::kProcess},
               {"<module> (mm.py:6)", FrameKind::kPython},
               {"clear_page_erms_[k]", FrameKind::kKernel, kernel}},
              20);
  profile.Add({{"[off-cpu]", FrameKind::kMarker},
               {"python3 (42)", FrameKind::kProcess},
               {"<module> (mm.py:7)", FrameKind::kPython},
               {"schedule_[k]", FrameKind::kKernel, kernel},
               {"[io wait]", FrameKind::kMarker}},
              30);
  for (std::string_view format : {"folded", "pprof", "speedscope"}) {
    absl::StatusOr<Recording> recording = ParseRecording(Write(profile, format), format);
    ASSERT_TRUE(recording.ok()) << recording.status();
    ReportFilter filter;
    filter.sample_type = *recording->SampleTypeIndex("wall");
    FlatReport report =
        BuildFlatReport(*recording, filter, ReportGrouping::kLine, ReportSort::kSelf);
    ASSERT_FALSE(report.rows.empty()) << format;
    const ReportRow& top = report.rows[0];
    EXPECT_EQ(top.key.line, 6) << format;
    auto share = [&](const ReportRow& row, CostColumn column) {
      return static_cast<double>(row.columns[static_cast<size_t>(column)]) / report.total;
    };
    // list_sort_impl has no CPython name: in folded it is native; pprof's
    // mapping knows it is the interpreter's.
    EXPECT_DOUBLE_EQ(share(top, CostColumn::kPython) + share(top, CostColumn::kNative), 0.95)
        << format;
    if (format == "pprof") {
      EXPECT_DOUBLE_EQ(share(top, CostColumn::kNative), 0.9);
      EXPECT_DOUBLE_EQ(share(top, CostColumn::kPython), 0.05);
    }
    EXPECT_DOUBLE_EQ(share(top, CostColumn::kSystem), 0.02) << format;
    EXPECT_DOUBLE_EQ(share(report.rows[1], CostColumn::kIoWait), 0.03) << format;
  }
}

TEST(RecordingReaderTest, UnknownSampleTypeNamesThoseThereAre) {
  absl::StatusOr<Recording> pprof = ParseRecording(Write(TwoThreadProfile(), "pprof"), "p.pb.gz");
  ASSERT_TRUE(pprof.ok()) << pprof.status();
  absl::StatusOr<size_t> index = pprof->SampleTypeIndex("alloc_space");
  EXPECT_THAT(index.status().message(), HasSubstr("samples, cpu"));
}

TEST(RecordingReaderTest, TruncatedPprofSaysSoAndNamesTheFile) {
  std::string data = Write(TwoThreadProfile(), "pprof");
  absl::StatusOr<Recording> recording =
      ParseRecording(std::string_view(data).substr(0, data.size() / 2), "cut.pb.gz");
  ASSERT_FALSE(recording.ok());
  EXPECT_EQ(recording.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(recording.status().message(), HasSubstr("cut.pb.gz"));
  EXPECT_THAT(recording.status().message(), HasSubstr("truncated"));
}

TEST(RecordingReaderTest, GzipOfSomethingElseIsNotAProfile) {
  absl::StatusOr<std::string> gz = Gzip("hello, this is not protobuf\n");
  ASSERT_TRUE(gz.ok());
  absl::StatusOr<Recording> recording = ParseRecording(*gz, "hello.gz");
  ASSERT_FALSE(recording.ok());
  EXPECT_THAT(recording.status().message(), HasSubstr("hello.gz"));
}

TEST(RecordingReaderTest, TextThatIsNotFoldedNamesTheLine) {
  absl::StatusOr<Recording> recording =
      ParseRecording("import os\nprint(os.getpid())\n", "script.py");
  ASSERT_FALSE(recording.ok());
  EXPECT_EQ(recording.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(recording.status().message(), HasSubstr("script.py: line 1"));
}

TEST(RecordingReaderTest, EmptyAndBinaryFilesAreRefused) {
  EXPECT_THAT(ParseRecording("", "empty").status().message(), HasSubstr("empty: empty file"));
  EXPECT_THAT(ParseRecording(std::string("\x7f"
                                         "ELF\0\0\x01",
                                         7),
                             "a.out")
                  .status()
                  .message(),
              HasSubstr("a.out: binary data"));
}

TEST(RecordingReaderTest, SpeedscopeOfOtherWritersKeepsFileAndLineApart) {
  absl::StatusOr<Recording> recording = ParseRecording(
      R"({"shared":{"frames":[{"name":"main","file":"m.py","line":4},{"name":"f","file":"m.py","line":9}]},
          "profiles":[{"type":"sampled","unit":"none","samples":[[0,1],[0]],"weights":[3,1]}]})",
      "py-spy.json");
  ASSERT_TRUE(recording.ok()) << recording.status();
  EXPECT_THAT(StackNames(*recording, 0), ElementsAre("main (m.py:4)", "f (m.py:9)"));
  EXPECT_EQ(recording->Total(0), 4);
}

TEST(RecordingReaderTest, SpeedscopeWithBadFrameIndexIsRefused) {
  absl::StatusOr<Recording> recording = ParseRecording(
      R"({"shared":{"frames":[{"name":"main"}]},
          "profiles":[{"type":"sampled","unit":"none","samples":[[0,5]],"weights":[1]}]})",
      "bad.json");
  ASSERT_FALSE(recording.ok());
  EXPECT_THAT(recording.status().message(), HasSubstr("bad.json: speedscope profile 0 sample 0"));
}

TEST(RecordingReaderTest, MissingFileIsNotFound) {
  absl::StatusOr<Recording> recording = ReadRecording("/nonexistent/profile.folded");
  EXPECT_EQ(recording.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(recording.status().message(), HasSubstr("/nonexistent/profile.folded"));
}

}  // namespace
}  // namespace pystrobe

#include "exporters/pprof_writer.h"

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "exporters/profile.h"
#include "exporters/profile.pb.h"
#include "exporters/profile_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

namespace pb = ::perftools::profiles;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

std::string Gunzip(const std::string& compressed) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);  // gzip only, not zlib
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buffer[4096];
  int result = Z_OK;
  while (result == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    result = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
  }
  EXPECT_EQ(result, Z_STREAM_END);
  EXPECT_EQ(stream.avail_in, 0u) << "bytes after the gzip stream";
  inflateEnd(&stream);
  return out;
}

// What a reader sees: the file written by PprofWriter, gunzipped and parsed
// by protobuf's own generated code.
pb::Profile WriteAndRead(const Profile& profile) {
  std::ostringstream out;
  absl::Status status = PprofWriter().Write(profile, out);
  EXPECT_TRUE(status.ok()) << status;
  pb::Profile read;
  EXPECT_TRUE(read.ParseFromString(Gunzip(out.str())));
  return read;
}

// The invariants of profile.proto every reader relies on.
void ExpectWellFormed(const pb::Profile& p) {
  ASSERT_GT(p.string_table_size(), 0);
  EXPECT_EQ(p.string_table(0), "");
  absl::flat_hash_set<std::string> strings(p.string_table().begin(), p.string_table().end());
  EXPECT_EQ(strings.size(), static_cast<size_t>(p.string_table_size())) << "duplicate strings";
  auto valid_string = [&](int64_t index) { return index >= 0 && index < p.string_table_size(); };

  absl::flat_hash_set<uint64_t> mappings, functions, locations;
  for (const pb::Mapping& m : p.mapping()) {
    EXPECT_NE(m.id(), 0u);
    EXPECT_TRUE(mappings.insert(m.id()).second) << "mapping id " << m.id();
    EXPECT_TRUE(valid_string(m.filename()));
    EXPECT_TRUE(valid_string(m.build_id()));
  }
  for (const pb::Function& f : p.function()) {
    EXPECT_NE(f.id(), 0u);
    EXPECT_TRUE(functions.insert(f.id()).second) << "function id " << f.id();
    EXPECT_TRUE(valid_string(f.name()) && valid_string(f.system_name()) &&
                valid_string(f.filename()));
    EXPECT_NE(f.name(), 0) << "a function without a name";
  }
  for (const pb::Location& l : p.location()) {
    EXPECT_NE(l.id(), 0u);
    EXPECT_TRUE(locations.insert(l.id()).second) << "location id " << l.id();
    if (l.mapping_id() != 0) {
      EXPECT_TRUE(mappings.contains(l.mapping_id()));
      for (const pb::Mapping& m : p.mapping()) {
        if (m.id() != l.mapping_id() || m.memory_limit() == 0) continue;
        EXPECT_GE(l.address(), m.memory_start());
        EXPECT_LT(l.address(), m.memory_limit());
      }
    }
    EXPECT_EQ(l.line_size(), 1);
    for (const pb::Line& line : l.line()) EXPECT_TRUE(functions.contains(line.function_id()));
  }
  for (const pb::Sample& s : p.sample()) {
    EXPECT_EQ(s.value_size(), p.sample_type_size());
    EXPECT_FALSE(s.location_id().empty());
    for (uint64_t id : s.location_id()) EXPECT_TRUE(locations.contains(id));
    for (const pb::Label& label : s.label()) {
      EXPECT_TRUE(valid_string(label.key()) && valid_string(label.str()));
      EXPECT_NE(label.key(), 0);
    }
  }
  for (const pb::ValueType& t : p.sample_type()) {
    EXPECT_TRUE(valid_string(t.type()) && valid_string(t.unit()));
  }
  EXPECT_TRUE(valid_string(p.default_sample_type()));
}

// A decoded view of the profile, by names instead of indices.
struct Decoded {
  const pb::Profile& p;

  const std::string& S(int64_t index) const { return p.string_table(static_cast<int>(index)); }
  const pb::Location& LocationById(uint64_t id) const {
    for (const pb::Location& l : p.location()) {
      if (l.id() == id) return l;
    }
    ADD_FAILURE() << "no location " << id;
    return p.location(0);
  }
  const pb::Function& FunctionById(uint64_t id) const {
    for (const pb::Function& f : p.function()) {
      if (f.id() == id) return f;
    }
    ADD_FAILURE() << "no function " << id;
    return p.function(0);
  }
  const pb::Mapping* MappingById(uint64_t id) const {
    for (const pb::Mapping& m : p.mapping()) {
      if (m.id() == id) return &m;
    }
    return nullptr;
  }
  // "name" or "name file:line" per location, leaf first, as pprof -traces prints.
  std::vector<std::string> Stack(const pb::Sample& s) const {
    std::vector<std::string> names;
    for (uint64_t id : s.location_id()) {
      const pb::Line& line = LocationById(id).line(0);
      const pb::Function& f = FunctionById(line.function_id());
      std::string name = S(f.name());
      if (f.filename() != 0) name += " " + S(f.filename()) + ":" + std::to_string(line.line());
      names.push_back(name);
    }
    return names;
  }
  std::vector<std::pair<std::string, std::string>> Labels(const pb::Sample& s) const {
    std::vector<std::pair<std::string, std::string>> labels;
    for (const pb::Label& l : s.label()) {
      labels.emplace_back(S(l.key()), l.str() != 0 ? S(l.str()) : std::to_string(l.num()));
    }
    return labels;
  }
  std::vector<std::pair<std::string, std::string>> SampleTypes() const {
    std::vector<std::pair<std::string, std::string>> types;
    for (const pb::ValueType& t : p.sample_type()) types.emplace_back(S(t.type()), S(t.unit()));
    return types;
  }
};

Profile PythonProfile() {
  Profile profile;
  profile.sample_rate_hz = 100;
  profile.title = "pystrobe record: python3 app.py";
  profile.Add({{"python3 (42)", FrameKind::kProcess},
               {"MainThread tid=42", FrameKind::kThread},
               {"<module> (app.py:20)", FrameKind::kPython},
               {"work (app.py:7)", FrameKind::kPython}},
              30);
  profile.Add({{"python3 (42)", FrameKind::kProcess},
               {"worker-1 tid=43", FrameKind::kThread},
               {"<module> (app.py:20)", FrameKind::kPython},
               {"work (app.py:9)", FrameKind::kPython},
               {"[native]", FrameKind::kMarker}},
              10);
  return profile;
}

TEST(PprofWriterTest, FileIsGzipThatProtobufDecodesWithEveryInvariantHeld) {
  std::ostringstream out;
  ASSERT_TRUE(PprofWriter().Write(PythonProfile(), out).ok());
  std::string bytes = out.str();
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(static_cast<uint8_t>(bytes[0]), 0x1f);
  EXPECT_EQ(static_cast<uint8_t>(bytes[1]), 0x8b);
  pb::Profile p = WriteAndRead(PythonProfile());
  ExpectWellFormed(p);
  EXPECT_EQ(p.sample_size(), 2);
}

TEST(PprofWriterTest, SameProfileGivesSameBytes) {
  std::ostringstream a, b;
  ASSERT_TRUE(PprofWriter().Write(PythonProfile(), a).ok());
  ASSERT_TRUE(PprofWriter().Write(PythonProfile(), b).ok());
  EXPECT_EQ(a.str(), b.str());
}

TEST(PprofWriterTest, CpuProfileHasSampleCountsAndCpuNanosecondsAtTheRate) {
  pb::Profile p = WriteAndRead(PythonProfile());
  Decoded d{p};
  EXPECT_THAT(d.SampleTypes(), ElementsAre(Pair("samples", "count"), Pair("cpu", "nanoseconds")));
  EXPECT_EQ(d.S(p.period_type().type()), "cpu");
  EXPECT_EQ(d.S(p.period_type().unit()), "nanoseconds");
  EXPECT_EQ(p.period(), 10'000'000);  // 1e9 / 100 Hz
  EXPECT_EQ(d.S(p.default_sample_type()), "cpu");
  EXPECT_THAT(p.sample(0).value(), ElementsAre(30, 300'000'000));
  EXPECT_THAT(p.sample(1).value(), ElementsAre(10, 100'000'000));
  ASSERT_EQ(p.comment_size(), 1);
  EXPECT_EQ(d.S(p.comment(0)), "pystrobe record: python3 app.py");
}

TEST(PprofWriterTest, PythonFramesAreFunctionsWithFileAndLinesLeafFirst) {
  pb::Profile p = WriteAndRead(PythonProfile());
  Decoded d{p};
  EXPECT_THAT(d.Stack(p.sample(0)), ElementsAre("work app.py:7", "<module> app.py:20"));
  EXPECT_THAT(d.Stack(p.sample(1)), ElementsAre("[native]", "work app.py:9", "<module> app.py:20"));
  // Two lines of `work`: two locations, one function.
  EXPECT_EQ(p.location_size(), 4);
  EXPECT_EQ(p.function_size(), 3);
  for (const pb::Function& f : p.function()) {
    if (d.S(f.name()) == "[native]") {
      EXPECT_EQ(f.filename(), 0) << "a marker has no file";
    } else {
      EXPECT_EQ(d.S(f.filename()), "app.py");
    }
  }
}

TEST(PprofWriterTest, ProcessAndThreadFramesBecomeLabelsNotLocations) {
  pb::Profile p = WriteAndRead(PythonProfile());
  Decoded d{p};
  EXPECT_THAT(d.Labels(p.sample(0)),
              ElementsAre(Pair("pid", "42"), Pair("comm", "python3"), Pair("tid", "42"),
                          Pair("thread_name", "MainThread")));
  EXPECT_THAT(d.Labels(p.sample(1)),
              ElementsAre(Pair("pid", "42"), Pair("comm", "python3"), Pair("tid", "43"),
                          Pair("thread_name", "worker-1")));
  // Numbers are numeric labels, so pprof -tagfocus=pid=42 works.
  EXPECT_EQ(p.sample(0).label(0).num(), 42);
  EXPECT_EQ(p.sample(0).label(0).str(), 0);
  for (const pb::Function& f : p.function()) {
    EXPECT_NE(d.S(f.name()), "python3 (42)");
    EXPECT_NE(d.S(f.name()), "MainThread tid=42");
  }
}

TEST(PprofWriterTest, CommWithSpacesAndParenthesesKeepsThemAll) {
  Profile profile;
  profile.Add({{"my (odd) app (7)", FrameKind::kProcess}, {"f", FrameKind::kNative}}, 1);
  pb::Profile p = WriteAndRead(profile);
  Decoded d{p};
  EXPECT_THAT(d.Labels(p.sample(0)), ElementsAre(Pair("pid", "7"), Pair("comm", "my (odd) app")));
}

TEST(PprofWriterTest, KernelAndNativeFramesGetFunctionsAndMappingsWhereKnown) {
  Profile profile;
  profile.sample_rate_hz = 99;
  profile.Add({{"app (5)", FrameKind::kProcess},
               {"main", FrameKind::kNative},
               {"libfoo.so.1+0x1a2b", FrameKind::kNative},
               {"[unknown] 0x7f00", FrameKind::kNative},
               {"entry_SYSCALL_64_[k]", FrameKind::kKernel},
               {"do_syscall_64_[k]", FrameKind::kKernel}},
              3);
  pb::Profile p = WriteAndRead(profile);
  ExpectWellFormed(p);
  Decoded d{p};
  EXPECT_THAT(d.Stack(p.sample(0)), ElementsAre("do_syscall_64", "entry_SYSCALL_64",
                                                "[unknown] 0x7f00", "libfoo.so.1+0x1a2b", "main"));
  EXPECT_EQ(p.period(), 10'101'010);  // 1e9 / 99, rounded
  absl::flat_hash_map<std::string, const pb::Mapping*> mapping_of;
  for (uint64_t id : p.sample(0).location_id()) {
    const pb::Location& l = d.LocationById(id);
    std::string name = d.S(d.FunctionById(l.line(0).function_id()).name());
    mapping_of[name] = d.MappingById(l.mapping_id());
    if (name == "libfoo.so.1+0x1a2b") {
      EXPECT_EQ(l.address(), 0x1a2bu);
    }
  }
  ASSERT_NE(mapping_of["do_syscall_64"], nullptr);
  EXPECT_EQ(mapping_of["do_syscall_64"], mapping_of["entry_SYSCALL_64"]);
  EXPECT_EQ(d.S(mapping_of["do_syscall_64"]->filename()), "[kernel]");
  EXPECT_TRUE(mapping_of["do_syscall_64"]->has_functions());
  ASSERT_NE(mapping_of["libfoo.so.1+0x1a2b"], nullptr);
  EXPECT_EQ(d.S(mapping_of["libfoo.so.1+0x1a2b"]->filename()), "libfoo.so.1");
  EXPECT_FALSE(mapping_of["libfoo.so.1+0x1a2b"]->has_functions()) << "pprof may symbolize it";
  EXPECT_EQ(mapping_of["main"], nullptr);
  EXPECT_EQ(mapping_of["[unknown] 0x7f00"], nullptr);
  EXPECT_EQ(p.mapping_size(), 2);
}

TEST(PprofWriterTest, OffCpuProfileSplitsWallTimeIntoCpuAndOffCpuSampleTypes) {
  Profile profile;
  profile.sample_rate_hz = 99;
  profile.count_unit = "microseconds";
  profile.Add({{"[on-cpu]", FrameKind::kMarker},
               {"python3 (9)", FrameKind::kProcess},
               {"spin (w.py:3)", FrameKind::kPython}},
              2500);
  profile.Add({{"[off-cpu]", FrameKind::kMarker},
               {"python3 (9)", FrameKind::kProcess},
               {"nap (w.py:8)", FrameKind::kPython},
               {"[sleep]", FrameKind::kMarker}},
              7000);
  pb::Profile p = WriteAndRead(profile);
  ExpectWellFormed(p);
  Decoded d{p};
  EXPECT_THAT(d.SampleTypes(), ElementsAre(Pair("wall", "nanoseconds"), Pair("cpu", "nanoseconds"),
                                           Pair("off_cpu", "nanoseconds")));
  EXPECT_EQ(d.S(p.default_sample_type()), "wall");
  EXPECT_THAT(p.sample(0).value(), ElementsAre(2'500'000, 2'500'000, 0));
  EXPECT_THAT(p.sample(1).value(), ElementsAre(7'000'000, 0, 7'000'000));
  // The roots chose the sample type; the reason of the wait stays the leaf.
  EXPECT_THAT(d.Stack(p.sample(0)), ElementsAre("spin w.py:3"));
  EXPECT_THAT(d.Stack(p.sample(1)), ElementsAre("[sleep]", "nap w.py:8"));
}

TEST(PprofWriterTest, WithoutARateOnlySampleCountsAreWritten) {
  Profile profile;
  profile.Add({{"a", FrameKind::kNative}}, 4);
  pb::Profile p = WriteAndRead(profile);
  Decoded d{p};
  EXPECT_THAT(d.SampleTypes(), ElementsAre(Pair("samples", "count")));
  EXPECT_THAT(p.sample(0).value(), ElementsAre(4));
}

TEST(PprofWriterTest, TimeAndDurationAreWrittenWhenKnown) {
  Profile profile = PythonProfile();
  EXPECT_EQ(WriteAndRead(profile).time_nanos(), 0);
  profile.start_time = absl::FromUnixNanos(1'700'000'000'123'456'789);
  profile.duration = absl::Milliseconds(2500);
  pb::Profile p = WriteAndRead(profile);
  EXPECT_EQ(p.time_nanos(), 1'700'000'000'123'456'789);
  EXPECT_EQ(p.duration_nanos(), 2'500'000'000);
}

TEST(PprofWriterTest, ProfileAndProcessLabelsAreAddedToTheirSamples) {
  Profile profile;
  profile.Add({{"python3 (42)", FrameKind::kProcess}, {"f (a.py:1)", FrameKind::kPython}}, 1);
  profile.Add({{"bash (50)", FrameKind::kProcess}, {"main", FrameKind::kNative}}, 1);
  profile.labels = {{"host", "db-1"}};
  profile.process_labels[42] = {{"container_id", "abc123"}, {"python_version", "3.11"}};
  pb::Profile p = WriteAndRead(profile);
  ExpectWellFormed(p);
  Decoded d{p};
  EXPECT_THAT(d.Labels(p.sample(0)),
              UnorderedElementsAre(Pair("pid", "42"), Pair("comm", "python3"), Pair("host", "db-1"),
                                   Pair("container_id", "abc123"), Pair("python_version", "3.11")));
  EXPECT_THAT(d.Labels(p.sample(1)),
              UnorderedElementsAre(Pair("pid", "50"), Pair("comm", "bash"), Pair("host", "db-1")));
}

TEST(PprofWriterTest, StackWithOnlyAProcessFrameKeepsItsSamplesUnderUnknown) {
  Profile profile;
  profile.sample_rate_hz = 10;
  profile.Add({{"kworker (3)", FrameKind::kProcess}}, 2);
  pb::Profile p = WriteAndRead(profile);
  ExpectWellFormed(p);
  Decoded d{p};
  EXPECT_THAT(d.Stack(p.sample(0)), ElementsAre("[unknown]"));
}

TEST(PprofWriterTest, EmptyProfileIsStillAValidFile) {
  pb::Profile p = WriteAndRead(Profile());
  ExpectWellFormed(p);
  EXPECT_THAT(p.sample(), IsEmpty());
}

TEST(PprofWriterTest, RegisteredForFormatPprofWithPbGzExtension) {
  absl::StatusOr<std::unique_ptr<ProfileWriter>> writer = MakeProfileWriter("pprof");
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->extension(), "pb.gz");
}

}  // namespace
}  // namespace pystrobe

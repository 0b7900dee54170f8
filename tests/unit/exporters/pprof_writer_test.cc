#include "exporters/pprof_writer.h"

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "exporters/profile.pb.h"
#include "exporters/profile_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/profile.h"

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

std::shared_ptr<const NativeModule> Module(std::string path, std::string build_id,
                                           NativeModule::Segment code) {
  auto module = std::make_shared<NativeModule>();
  module->path = std::move(path);
  module->build_id = std::move(build_id);
  module->code_segments = {code};
  return module;
}

// Modules as SharedModuleSymbolizer sees Debian's python3.11 (non-PIE: its
// code runs at p_vaddr 0x41f000 from file offset 0x1f000) and libc (PIE).
std::shared_ptr<const NativeModule> Python311Module() {
  return Module("/usr/bin/python3.11", "571d98e01096d5c1c32420d229a6731a0a50d2a0",
                {.vaddr = 0x41f000, .size = 0x2b2289, .file_offset = 0x1f000});
}
std::shared_ptr<const NativeModule> LibcModule() {
  return Module("/usr/lib/x86_64-linux-gnu/libc.so.6", "93ac61ec5a8eb1396f9fbd350e3169a558528a40",
                {.vaddr = 0x26000, .size = 0x1550fc, .file_offset = 0x26000});
}

// Where a location's address lies in the file, by its mapping's layout.
uint64_t FileOffsetOf(const pb::Location& l, const pb::Mapping& m) {
  return l.address() - m.memory_start() + m.file_offset();
}

TEST(PprofWriterTest, NativeFramesAreInTheMappingOfTheirFileWithBuildIdAndElfAddresses) {
  Profile profile;
  profile.sample_rate_hz = 99;
  std::shared_ptr<const NativeModule> python = Python311Module();
  std::shared_ptr<const NativeModule> libc = LibcModule();
  profile.Add({{"python3.11 (5)", FrameKind::kProcess},
               {"_start", FrameKind::kNative, python, 0x20010},
               {"qsort", FrameKind::kNative, libc, 0x40000},
               {"libc.so.6+0x50000", FrameKind::kNative, libc, 0x50000}},
              3);
  // Another process: its own records of the same files share the mappings.
  profile.Add({{"python3.11 (6)", FrameKind::kProcess},
               {"_start", FrameKind::kNative, Python311Module(), 0x20010},
               {"Py_RunMain", FrameKind::kNative, Python311Module(), 0x30000}},
              2);
  pb::Profile p = WriteAndRead(profile);
  ExpectWellFormed(p);
  Decoded d{p};
  ASSERT_EQ(p.mapping_size(), 2);
  absl::flat_hash_map<std::string, const pb::Location*> location_of;
  for (const pb::Location& l : p.location()) {
    location_of[d.S(d.FunctionById(l.line(0).function_id()).name())] = &l;
  }
  ASSERT_EQ(location_of.size(), 4u) << "one location per distinct frame";

  const pb::Mapping* python_mapping = d.MappingById(location_of["_start"]->mapping_id());
  ASSERT_NE(python_mapping, nullptr);
  EXPECT_EQ(d.S(python_mapping->filename()), "/usr/bin/python3.11");
  EXPECT_EQ(d.S(python_mapping->build_id()), "571d98e01096d5c1c32420d229a6731a0a50d2a0");
  EXPECT_EQ(python_mapping->memory_start(), 0x41f000u);
  EXPECT_EQ(python_mapping->memory_limit(), 0x41f000u + 0x2b2289u);
  EXPECT_EQ(python_mapping->file_offset(), 0x1f000u);
  EXPECT_TRUE(python_mapping->has_functions());
  // ELF virtual addresses, which map back to the frames' file offsets.
  EXPECT_EQ(location_of["_start"]->address(), 0x420010u);
  EXPECT_EQ(FileOffsetOf(*location_of["_start"], *python_mapping), 0x20010u);
  EXPECT_EQ(location_of["Py_RunMain"]->mapping_id(), python_mapping->id());
  EXPECT_EQ(location_of["Py_RunMain"]->address(), 0x430000u);

  const pb::Mapping* libc_mapping = d.MappingById(location_of["qsort"]->mapping_id());
  ASSERT_NE(libc_mapping, nullptr);
  EXPECT_EQ(d.S(libc_mapping->filename()), "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(d.S(libc_mapping->build_id()), "93ac61ec5a8eb1396f9fbd350e3169a558528a40");
  EXPECT_EQ(libc_mapping->memory_start(), 0x26000u);
  EXPECT_EQ(libc_mapping->file_offset(), 0x26000u);
  EXPECT_EQ(location_of["qsort"]->address(), 0x40000u);
  EXPECT_EQ(location_of["libc.so.6+0x50000"]->mapping_id(), libc_mapping->id());
  EXPECT_EQ(location_of["libc.so.6+0x50000"]->address(), 0x50000u);
  EXPECT_FALSE(libc_mapping->has_functions()) << "a frame there has no symbol";
}

TEST(PprofWriterTest, OneFunctionAtTwoAddressesIsTwoLocationsOfOneFunction) {
  Profile profile;
  std::shared_ptr<const NativeModule> libc = LibcModule();
  profile.Add({{"a (1)", FrameKind::kProcess}, {"qsort", FrameKind::kNative, libc, 0x40000}}, 1);
  profile.Add({{"b (2)", FrameKind::kProcess}, {"qsort", FrameKind::kNative, libc, 0x40100}}, 1);
  pb::Profile p = WriteAndRead(profile);
  ExpectWellFormed(p);
  ASSERT_EQ(p.location_size(), 2);
  EXPECT_EQ(p.function_size(), 1);
  EXPECT_EQ(p.mapping_size(), 1);
  EXPECT_EQ(p.location(0).address(), 0x40000u);
  EXPECT_EQ(p.location(1).address(), 0x40100u);
}

TEST(PprofWriterTest, ModuleWhoseFileWasNotReadIsAMappingFromZeroAddressedByFileOffset) {
  Profile profile;
  auto gone = std::make_shared<NativeModule>();
  gone->path = "/opt/app/libgone.so";
  // No segments: the file could not be read. An offset outside every
  // segment of a module that has some is addressed the same way.
  std::shared_ptr<const NativeModule> libc = LibcModule();
  profile.Add({{"app (5)", FrameKind::kProcess},
               {"libgone.so+0x1234", FrameKind::kNative, gone, 0x1234},
               {"libc.so.6+0x10", FrameKind::kNative, libc, 0x10}},
              1);
  pb::Profile p = WriteAndRead(profile);
  ExpectWellFormed(p);
  Decoded d{p};
  ASSERT_EQ(p.mapping_size(), 2);
  for (const pb::Location& l : p.location()) {
    const pb::Mapping* m = d.MappingById(l.mapping_id());
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->memory_start(), 0u);
    EXPECT_EQ(m->file_offset(), 0u);
    EXPECT_GT(m->memory_limit(), l.address());
    EXPECT_FALSE(m->has_functions());
  }
  EXPECT_EQ(d.S(d.MappingById(p.location(0).mapping_id())->filename()), "/opt/app/libgone.so");
  EXPECT_EQ(p.location(0).address(), 0x1234u);
  EXPECT_EQ(d.MappingById(p.location(0).mapping_id())->build_id(), 0);
  EXPECT_EQ(p.location(1).address(), 0x10u);
  EXPECT_EQ(d.S(d.MappingById(p.location(1).mapping_id())->build_id()),
            "93ac61ec5a8eb1396f9fbd350e3169a558528a40");
}

TEST(PprofWriterTest, KernelMappingCarriesTheKernelBuildId) {
  Profile profile;
  auto kernel = std::make_shared<NativeModule>();
  kernel->path = "[kernel]";
  kernel->build_id = "abf9ec0ec5946600c90641cf5db998472fac410b";
  profile.Add({{"app (5)", FrameKind::kProcess},
               {"entry_SYSCALL_64_[k]", FrameKind::kKernel, kernel},
               {"do_syscall_64_[k]", FrameKind::kKernel, kernel}},
              1);
  pb::Profile p = WriteAndRead(profile);
  ExpectWellFormed(p);
  Decoded d{p};
  ASSERT_EQ(p.mapping_size(), 1);
  EXPECT_EQ(d.S(p.mapping(0).filename()), "[kernel]");
  EXPECT_EQ(d.S(p.mapping(0).build_id()), "abf9ec0ec5946600c90641cf5db998472fac410b");
  EXPECT_TRUE(p.mapping(0).has_functions());
  for (const pb::Location& l : p.location()) EXPECT_EQ(l.mapping_id(), p.mapping(0).id());
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

TEST(PprofWriterTest, ResidentGrowthIsOneSampleTypeInBytesWithItsSamplingInterval) {
  Profile profile = PythonProfile();
  profile.count_unit = "bytes";
  profile.sample_rate_hz = 0;
  profile.sampling_interval_bytes = 512 * 1024;
  pb::Profile p = WriteAndRead(profile);
  Decoded d{p};
  EXPECT_THAT(d.SampleTypes(), ElementsAre(Pair("resident_growth", "bytes")));
  EXPECT_EQ(d.S(p.period_type().type()), "space");
  EXPECT_EQ(d.S(p.period_type().unit()), "bytes");
  EXPECT_EQ(p.period(), 512 * 1024);
  EXPECT_EQ(d.S(p.default_sample_type()), "resident_growth");
  EXPECT_THAT(p.sample(0).value(), ElementsAre(30));
}

TEST(PprofWriterTest, AllocationsAreInuseOrAllocSpaceInBytes) {
  Profile profile = PythonProfile();
  profile.sample_rate_hz = 0;
  profile.sampling_interval_bytes = 512 * 1024;
  profile.count_unit = "inuse_bytes";
  pb::Profile inuse = WriteAndRead(profile);
  EXPECT_THAT(Decoded{inuse}.SampleTypes(), ElementsAre(Pair("inuse_space", "bytes")));
  profile.count_unit = "alloc_bytes";
  pb::Profile alloc = WriteAndRead(profile);
  EXPECT_THAT(Decoded{alloc}.SampleTypes(), ElementsAre(Pair("alloc_space", "bytes")));
  EXPECT_EQ(Decoded{alloc}.S(alloc.period_type().type()), "space");
}

}  // namespace
}  // namespace pystrobe

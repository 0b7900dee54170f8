#include "exporters/otlp_encoder.h"

#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "exporters/profile_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/profile.h"

namespace pystrobe {
namespace {

namespace otlp = ::opentelemetry::proto::profiles::v1development;
namespace otlp_common = ::opentelemetry::proto::common::v1;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

// A request as a receiver reads it: parsed back from its bytes by protobuf's
// generated classes, with lookups through the dictionary.
struct Decoded {
  otlp_collector::ExportProfilesServiceRequest request;

  const otlp::ProfilesDictionary& dict() const { return request.dictionary(); }
  const std::string& S(int32_t index) const { return dict().string_table(index); }

  static std::string Value(const otlp_common::AnyValue& value) {
    return value.has_string_value() ? value.string_value() : std::to_string(value.int_value());
  }

  std::map<std::string, std::string> ResourceAttributes(int resource) const {
    std::map<std::string, std::string> out;
    for (const otlp_common::KeyValue& kv :
         request.resource_profiles(resource).resource().attributes()) {
      out[kv.key()] = Value(kv.value());
    }
    return out;
  }

  std::map<std::string, std::string> Attributes(
      const google::protobuf::RepeatedField<int32_t>& indices) const {
    std::map<std::string, std::string> out;
    for (int32_t index : indices) {
      const otlp::KeyValueAndUnit& attribute = dict().attribute_table(index);
      out[S(attribute.key_strindex())] = Value(attribute.value());
    }
    return out;
  }

  // The profiles of a resource as "type/unit".
  std::vector<std::string> ProfileTypes(int resource) const {
    std::vector<std::string> types;
    for (const otlp::Profile& p :
         request.resource_profiles(resource).scope_profiles(0).profiles()) {
      types.push_back(S(p.sample_type().type_strindex()) + "/" +
                      S(p.sample_type().unit_strindex()));
    }
    return types;
  }

  const otlp::Profile& ProfileOf(int resource, const std::string& type) const {
    for (const otlp::Profile& p :
         request.resource_profiles(resource).scope_profiles(0).profiles()) {
      if (S(p.sample_type().type_strindex()) == type) return p;
    }
    ADD_FAILURE() << "no profile " << type;
    static const otlp::Profile* empty = new otlp::Profile();
    return *empty;
  }

  // A sample's stack, root first, as "function file:line" / "function".
  std::vector<std::string> Stack(const otlp::Sample& sample) const {
    std::vector<std::string> names;
    const otlp::Stack& stack = dict().stack_table(sample.stack_index());
    for (int i = stack.location_indices_size() - 1; i >= 0; --i) {
      const otlp::Location& location = dict().location_table(stack.location_indices(i));
      const otlp::Line& line = location.lines(0);
      const otlp::Function& f = dict().function_table(line.function_index());
      std::string name = S(f.name_strindex());
      if (f.filename_strindex() != 0) {
        name += " " + S(f.filename_strindex()) + ":" + std::to_string(line.line());
      }
      names.push_back(name);
    }
    return names;
  }

  // The resource of a pid.
  int ResourceOf(int pid) const {
    for (int r = 0; r < request.resource_profiles_size(); ++r) {
      if (ResourceAttributes(r)["process.pid"] == std::to_string(pid)) return r;
    }
    ADD_FAILURE() << "no resource for pid " << pid;
    return 0;
  }
};

Decoded Encode(std::vector<const Profile*> profiles, OtlpResourceOptions options = {}) {
  if (options.host_name.empty()) options.host_name = "node-7";
  std::string bytes;
  EXPECT_TRUE(ToOtlpRequest(profiles, options).SerializeToString(&bytes));
  Decoded decoded;
  EXPECT_TRUE(decoded.request.ParseFromString(bytes));
  return decoded;
}

std::shared_ptr<const NativeModule> LibcModule() {
  auto module = std::make_shared<NativeModule>();
  module->path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  module->build_id = "93ac61ec5a8eb1396f9fbd350e3169a558528a40";
  module->code_segments = {{.vaddr = 0x26000, .size = 0x1550fc, .file_offset = 0x26000}};
  return module;
}

// Two CPython processes sharing code, one with threads, native and kernel frames.
Profile TwoProcessProfile() {
  Profile profile;
  profile.sample_rate_hz = 100;
  profile.start_time = absl::FromUnixSeconds(1'800'000'000);
  profile.duration = absl::Seconds(60);
  profile.labels = {{"env", "prod"}};
  profile.process_labels[42] = {{"python_version", "3.11.2"}, {"container_id", "abc123"}};
  profile.Add({{"python3 (42)", FrameKind::kProcess},
               {"MainThread tid=42", FrameKind::kThread},
               {"<module> (app.py:20)", FrameKind::kPython},
               {"work (app.py:7)", FrameKind::kPython}},
              30);
  profile.Add({{"python3 (42)", FrameKind::kProcess},
               {"worker-1 tid=43", FrameKind::kThread},
               {"<module> (app.py:20)", FrameKind::kPython},
               {"memcpy", FrameKind::kNative, LibcModule(), 0x27010},
               {"schedule_[k]", FrameKind::kKernel}},
              10, 120'000'000);
  profile.Add({{"python3 (77)", FrameKind::kProcess},
               {"MainThread tid=77", FrameKind::kThread},
               {"<module> (app.py:20)", FrameKind::kPython},
               {"work (app.py:7)", FrameKind::kPython}},
              5);
  return profile;
}

TEST(OtlpEncoderTest, EveryDictionaryTableStartsWithItsZeroValue) {
  Profile profile = TwoProcessProfile();
  Decoded d = Encode({&profile});
  EXPECT_EQ(d.S(0), "");
  ASSERT_GT(d.dict().mapping_table_size(), 1);
  EXPECT_EQ(d.dict().mapping_table(0).ByteSizeLong(), 0u);
  EXPECT_EQ(d.dict().location_table(0).ByteSizeLong(), 0u);
  EXPECT_EQ(d.dict().function_table(0).ByteSizeLong(), 0u);
  EXPECT_EQ(d.dict().stack_table(0).ByteSizeLong(), 0u);
  EXPECT_EQ(d.dict().attribute_table(0).ByteSizeLong(), 0u);
  ASSERT_EQ(d.dict().link_table_size(), 1);
  EXPECT_EQ(d.dict().link_table(0).trace_id(), std::string(16, '\0'));
  EXPECT_EQ(d.dict().link_table(0).span_id(), std::string(8, '\0'));
  std::set<std::string> strings(d.dict().string_table().begin(), d.dict().string_table().end());
  EXPECT_EQ(strings.size(), static_cast<size_t>(d.dict().string_table_size())) << "duplicates";
}

TEST(OtlpEncoderTest, OneResourcePerProcessWithSemanticConventionAttributes) {
  Profile profile = TwoProcessProfile();
  Decoded d = Encode({&profile}, {.service_name = "checkout", .host_name = "node-7"});
  ASSERT_EQ(d.request.resource_profiles_size(), 2);
  EXPECT_EQ(d.ResourceAttributes(d.ResourceOf(42)),
            (std::map<std::string, std::string>{{"service.name", "checkout"},
                                                {"host.name", "node-7"},
                                                {"process.pid", "42"},
                                                {"process.executable.name", "python3"},
                                                {"process.runtime.name", "CPython"},
                                                {"process.runtime.version", "3.11.2"},
                                                {"container.id", "abc123"},
                                                {"env", "prod"}}));
  EXPECT_EQ(d.ResourceAttributes(d.ResourceOf(77))["process.pid"], "77");
  EXPECT_EQ(d.ResourceAttributes(d.ResourceOf(77)).count("process.runtime.name"), 0u);
  const otlp::ScopeProfiles& scope = d.request.resource_profiles(0).scope_profiles(0);
  EXPECT_EQ(scope.scope().name(), "pystrobe");
}

TEST(OtlpEncoderTest, CpuWindowIsOneProfileOfSamplesAndOneOfCpuTime) {
  Profile profile = TwoProcessProfile();
  Decoded d = Encode({&profile});
  int r = d.ResourceOf(42);
  EXPECT_THAT(d.ProfileTypes(r), ElementsAre("samples/count", "cpu/nanoseconds"));
  const otlp::Profile& samples = d.ProfileOf(r, "samples");
  const otlp::Profile& cpu = d.ProfileOf(r, "cpu");
  ASSERT_EQ(samples.samples_size(), 2);
  EXPECT_THAT(samples.samples(0).values(), ElementsAre(30));
  EXPECT_THAT(samples.samples(1).values(), ElementsAre(10));
  // 10 ms a sample at 100 Hz where the stack does not say; its own time where it does.
  EXPECT_THAT(cpu.samples(0).values(), ElementsAre(300'000'000));
  EXPECT_THAT(cpu.samples(1).values(), ElementsAre(120'000'000));
  EXPECT_EQ(d.S(cpu.period_type().type_strindex()), "cpu");
  EXPECT_EQ(cpu.period(), 10'000'000);
  EXPECT_EQ(cpu.time_unix_nano(), 1'800'000'000ull * 1'000'000'000ull);
  EXPECT_EQ(cpu.duration_nano(), 60ull * 1'000'000'000ull);
}

TEST(OtlpEncoderTest, StacksAreLeafFirstWithPythonFunctionsFilesAndLines) {
  Profile profile = TwoProcessProfile();
  Decoded d = Encode({&profile});
  const otlp::Profile& cpu = d.ProfileOf(d.ResourceOf(42), "cpu");
  EXPECT_THAT(d.Stack(cpu.samples(0)), ElementsAre("<module> app.py:20", "work app.py:7"));
  EXPECT_THAT(d.Stack(cpu.samples(1)), ElementsAre("<module> app.py:20", "memcpy", "schedule"));
}

TEST(OtlpEncoderTest, ProcessesShareOneDictionary) {
  Profile profile = TwoProcessProfile();
  Decoded d = Encode({&profile});
  // The same stack in two processes is one stack of the dictionary.
  EXPECT_EQ(d.ProfileOf(d.ResourceOf(42), "cpu").samples(0).stack_index(),
            d.ProfileOf(d.ResourceOf(77), "cpu").samples(0).stack_index());
  int work_functions = 0;
  for (const otlp::Function& f : d.dict().function_table())
    work_functions += d.S(f.name_strindex()) == "work";
  EXPECT_EQ(work_functions, 1);
}

TEST(OtlpEncoderTest, ThreadsAreSampleAttributes) {
  Profile profile = TwoProcessProfile();
  Decoded d = Encode({&profile});
  const otlp::Profile& cpu = d.ProfileOf(d.ResourceOf(42), "cpu");
  EXPECT_THAT(d.Attributes(cpu.samples(0).attribute_indices()),
              UnorderedElementsAre(Pair("thread.id", "42"), Pair("thread.name", "MainThread")));
  EXPECT_THAT(d.Attributes(cpu.samples(1).attribute_indices()),
              UnorderedElementsAre(Pair("thread.id", "43"), Pair("thread.name", "worker-1")));
}

TEST(OtlpEncoderTest, NativeFramesKeepMappingBuildIdAndElfAddress) {
  Profile profile = TwoProcessProfile();
  Decoded d = Encode({&profile});
  const otlp::Profile& cpu = d.ProfileOf(d.ResourceOf(42), "cpu");
  const otlp::Stack& stack = d.dict().stack_table(cpu.samples(1).stack_index());
  // Leaf first: schedule, memcpy, <module>.
  const otlp::Location& memcpy = d.dict().location_table(stack.location_indices(1));
  const otlp::Mapping& libc = d.dict().mapping_table(memcpy.mapping_index());
  EXPECT_EQ(d.S(libc.filename_strindex()), "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(libc.memory_start(), 0x26000u);
  EXPECT_EQ(libc.file_offset(), 0x26000u);
  EXPECT_EQ(memcpy.address(), 0x27010u);
  EXPECT_THAT(d.Attributes(libc.attribute_indices()),
              ElementsAre(Pair("process.executable.build_id.gnu",
                               "93ac61ec5a8eb1396f9fbd350e3169a558528a40")));
  EXPECT_THAT(d.Attributes(memcpy.attribute_indices()),
              ElementsAre(Pair("profile.frame.type", "native")));
  const otlp::Location& schedule = d.dict().location_table(stack.location_indices(0));
  EXPECT_THAT(d.Attributes(schedule.attribute_indices()),
              ElementsAre(Pair("profile.frame.type", "kernel")));
  const otlp::Location& module = d.dict().location_table(stack.location_indices(2));
  EXPECT_THAT(d.Attributes(module.attribute_indices()),
              ElementsAre(Pair("profile.frame.type", "cpython")));
}

TEST(OtlpEncoderTest, OffCpuWindowIsCpuAndOffCpuTimeWithoutTheirSum) {
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
  Decoded d = Encode({&profile});
  ASSERT_EQ(d.request.resource_profiles_size(), 1);
  EXPECT_THAT(d.ProfileTypes(0), ElementsAre("cpu/nanoseconds", "off_cpu/nanoseconds"));
  const otlp::Profile& cpu = d.ProfileOf(0, "cpu");
  const otlp::Profile& off_cpu = d.ProfileOf(0, "off_cpu");
  ASSERT_EQ(cpu.samples_size(), 1);
  ASSERT_EQ(off_cpu.samples_size(), 1);
  EXPECT_THAT(cpu.samples(0).values(), ElementsAre(30'000'000));
  EXPECT_THAT(off_cpu.samples(0).values(), ElementsAre(70'000'000));
  EXPECT_THAT(d.Stack(off_cpu.samples(0)), ElementsAre("wait app.py:9", "[sleep]"));
}

TEST(OtlpEncoderTest, MemoryGrowthOfTheWindowJoinsTheSameRequest) {
  Profile cpu = TwoProcessProfile();
  Profile memory;
  memory.count_unit = "bytes";
  memory.sampling_interval_bytes = 512 * 1024;
  memory.Add({{"python3 (42)", FrameKind::kProcess}, {"load (app.py:30)", FrameKind::kPython}},
             3 * 512 * 1024);
  Decoded d = Encode({&cpu, &memory});
  int r = d.ResourceOf(42);
  EXPECT_THAT(d.ProfileTypes(r),
              ElementsAre("samples/count", "cpu/nanoseconds", "resident_growth/bytes"));
  const otlp::Profile& growth = d.ProfileOf(r, "resident_growth");
  EXPECT_THAT(growth.samples(0).values(), ElementsAre(3 * 512 * 1024));
  EXPECT_EQ(growth.period(), 512 * 1024);
  EXPECT_THAT(d.ProfileTypes(d.ResourceOf(77)), ElementsAre("samples/count", "cpu/nanoseconds"));
}

TEST(OtlpEncoderTest, StacksWithoutAProcessGoToAResourceWithoutProcessAttributes) {
  Profile profile;
  profile.sample_rate_hz = 10;
  profile.Add({{"[idle]", FrameKind::kMarker}}, 4);
  Decoded d = Encode({&profile});
  ASSERT_EQ(d.request.resource_profiles_size(), 1);
  EXPECT_EQ(d.ResourceAttributes(0).count("process.pid"), 0u);
  EXPECT_EQ(d.ResourceAttributes(0)["service.name"], "pystrobe");
}

TEST(OtlpEncoderTest, EmptyProfileIsARequestWithADictionaryAndNoResources) {
  Profile profile;
  Decoded d = Encode({&profile});
  EXPECT_THAT(d.request.resource_profiles(), IsEmpty());
  EXPECT_EQ(d.S(0), "");
}

TEST(OtlpEncoderTest, SameProfilesGiveSameBytes) {
  Profile profile = TwoProcessProfile();
  const Profile* profiles[] = {&profile};
  OtlpResourceOptions options{.host_name = "h"};
  std::string a, b;
  ASSERT_TRUE(ToOtlpRequest(profiles, options).SerializeToString(&a));
  ASSERT_TRUE(ToOtlpRequest(profiles, options).SerializeToString(&b));
  EXPECT_EQ(a, b);
}

TEST(OtlpEncoderTest, RegisteredForFormatOtlpWritingTheRequestAsItIsPosted) {
  absl::StatusOr<std::unique_ptr<ProfileWriter>> writer = MakeProfileWriter("otlp");
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->extension(), "otlp.pb");
  Profile profile = TwoProcessProfile();
  std::ostringstream out;
  ASSERT_TRUE((*writer)->Write(profile, out).ok());
  otlp_collector::ExportProfilesServiceRequest request;
  ASSERT_TRUE(request.ParseFromString(out.str()));
  EXPECT_EQ(request.resource_profiles_size(), 2);
}

}  // namespace
}  // namespace pystrobe

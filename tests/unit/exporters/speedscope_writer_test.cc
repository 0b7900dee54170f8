#include "exporters/speedscope_writer.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "exporters/profile_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/profile.h"

namespace pystrobe {
namespace {

using ::google::protobuf::ListValue;
using ::google::protobuf::Struct;
using ::google::protobuf::Value;
using ::testing::ElementsAre;

// The file as a strict JSON parser (protobuf's) reads it.
Struct WriteAndParse(const Profile& profile) {
  std::ostringstream out;
  absl::Status status = SpeedscopeWriter().Write(profile, out);
  EXPECT_TRUE(status.ok()) << status;
  Struct parsed;
  auto parse = google::protobuf::util::JsonStringToMessage(out.str(), &parsed);
  EXPECT_TRUE(parse.ok()) << parse.ToString() << "\n" << out.str();
  return parsed;
}

const Value& Field(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  if (it == s.fields().end()) {
    ADD_FAILURE() << "no field " << key;
    static const Value* missing = new Value();
    return *missing;
  }
  return it->second;
}

const ListValue& Frames(const Struct& file) {
  return Field(Field(file, "shared").struct_value(), "frames").list_value();
}

// Each sample of a profile as frame names, root first, with its weight.
std::vector<std::string> Samples(const Struct& file, const Struct& profile) {
  const ListValue& frames = Frames(file);
  const ListValue& samples = Field(profile, "samples").list_value();
  const ListValue& weights = Field(profile, "weights").list_value();
  EXPECT_EQ(samples.values_size(), weights.values_size());
  std::vector<std::string> out;
  for (int i = 0; i < samples.values_size(); ++i) {
    std::string line;
    for (const Value& index : samples.values(i).list_value().values()) {
      int frame = static_cast<int>(index.number_value());
      EXPECT_GE(frame, 0);
      EXPECT_LT(frame, frames.values_size());
      if (!line.empty()) line += ";";
      line += Field(frames.values(frame).struct_value(), "name").string_value();
    }
    out.push_back(line + " " +
                  std::to_string(static_cast<int64_t>(weights.values(i).number_value())));
  }
  return out;
}

Profile TwoProcesses() {
  Profile profile;
  profile.title = "pystrobe record: all";
  profile.sample_rate_hz = 99;
  profile.Add({{"python3 (42)", FrameKind::kProcess},
               {"<module> (app.py:20)", FrameKind::kPython},
               {"work (app.py:7)", FrameKind::kPython}},
              3);
  profile.Add({{"bash (50)", FrameKind::kProcess}, {"main", FrameKind::kNative}}, 1);
  profile.Add({{"python3 (42)", FrameKind::kProcess},
               {"<module> (app.py:20)", FrameKind::kPython},
               {"read_[k]", FrameKind::kKernel}},
              2);
  return profile;
}

TEST(SpeedscopeWriterTest, FileHasTheSchemaSharedFramesAndSampledProfiles) {
  Struct file = WriteAndParse(TwoProcesses());
  EXPECT_EQ(Field(file, "$schema").string_value(),
            "https://www.speedscope.app/file-format-schema.json");
  EXPECT_EQ(Field(file, "name").string_value(), "pystrobe record: all");
  EXPECT_EQ(Field(file, "activeProfileIndex").number_value(), 0);
  EXPECT_EQ(Frames(file).values_size(), 4);  // <module>, work, main, read_[k]
  for (const Value& profile : Field(file, "profiles").list_value().values()) {
    const Struct& p = profile.struct_value();
    EXPECT_EQ(Field(p, "type").string_value(), "sampled");
    EXPECT_EQ(Field(p, "unit").string_value(), "none");
    EXPECT_EQ(Field(p, "startValue").number_value(), 0);
  }
}

TEST(SpeedscopeWriterTest, OneProfilePerProcessHeaviestFirstWithoutTheProcessFrame) {
  Struct file = WriteAndParse(TwoProcesses());
  const ListValue& profiles = Field(file, "profiles").list_value();
  ASSERT_EQ(profiles.values_size(), 2);
  const Struct& python = profiles.values(0).struct_value();
  const Struct& bash = profiles.values(1).struct_value();
  EXPECT_EQ(Field(python, "name").string_value(), "python3 (42)");
  EXPECT_EQ(Field(python, "endValue").number_value(), 5);
  // Sorted by name, root first.
  EXPECT_THAT(Samples(file, python), ElementsAre("<module> (app.py:20);read_[k] 2",
                                                 "<module> (app.py:20);work (app.py:7) 3"));
  EXPECT_EQ(Field(bash, "name").string_value(), "bash (50)");
  EXPECT_THAT(Samples(file, bash), ElementsAre("main 1"));
}

TEST(SpeedscopeWriterTest, PythonFramesCarryFileAndLine) {
  Struct file = WriteAndParse(TwoProcesses());
  const ListValue& frames = Frames(file);
  const Struct& module = frames.values(0).struct_value();
  EXPECT_EQ(Field(module, "name").string_value(), "<module> (app.py:20)");
  EXPECT_EQ(Field(module, "file").string_value(), "app.py");
  EXPECT_EQ(Field(module, "line").number_value(), 20);
  const Struct& native = frames.values(2).struct_value();
  EXPECT_EQ(Field(native, "name").string_value(), "main");
  EXPECT_FALSE(native.fields().contains("file"));
}

TEST(SpeedscopeWriterTest, OffCpuProfileIsInMicroseconds) {
  Profile profile;
  profile.count_unit = "microseconds";
  profile.Add({{"[off-cpu]", FrameKind::kMarker},
               {"python3 (9)", FrameKind::kProcess},
               {"nap (w.py:8)", FrameKind::kPython},
               {"[sleep]", FrameKind::kMarker}},
              7000);
  Struct file = WriteAndParse(profile);
  const Struct& p = Field(file, "profiles").list_value().values(0).struct_value();
  EXPECT_EQ(Field(p, "unit").string_value(), "microseconds");
  EXPECT_THAT(Samples(file, p), ElementsAre("[off-cpu];nap (w.py:8);[sleep] 7000"));
}

TEST(SpeedscopeWriterTest, StacksWithoutAProcessShareAProfileNamedByTheTitle) {
  Profile profile;
  profile.title = "t";
  profile.Add({{"a", FrameKind::kNative}}, 1);
  Struct file = WriteAndParse(profile);
  const Struct& p = Field(file, "profiles").list_value().values(0).struct_value();
  EXPECT_EQ(Field(p, "name").string_value(), "t");
}

TEST(SpeedscopeWriterTest, EmptyProfileIsValidJson) {
  Struct file = WriteAndParse(Profile());
  EXPECT_EQ(Field(file, "profiles").list_value().values_size(), 0);
}

TEST(SpeedscopeWriterTest, NamesAreEscapedAndInvalidUtf8Replaced) {
  Profile profile;
  profile.Add({{"we\"ird\xFF (1)", FrameKind::kProcess}, {"f\\g", FrameKind::kNative}}, 1);
  Struct file = WriteAndParse(profile);
  const Struct& p = Field(file, "profiles").list_value().values(0).struct_value();
  EXPECT_EQ(Field(p, "name").string_value(), "we\"ird\xEF\xBF\xBD (1)");
  EXPECT_THAT(Samples(file, p), ElementsAre("f\\g 1"));
}

TEST(SpeedscopeWriterTest, RegisteredForFormatSpeedscope) {
  absl::StatusOr<std::unique_ptr<ProfileWriter>> writer = MakeProfileWriter("speedscope");
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->extension(), "speedscope.json");
}

TEST(SpeedscopeWriterTest, ResidentGrowthIsInBytes) {
  Profile profile = TwoProcesses();
  profile.count_unit = "bytes";
  Struct file = WriteAndParse(profile);
  for (const Value& p : Field(file, "profiles").list_value().values()) {
    EXPECT_EQ(Field(p.struct_value(), "unit").string_value(), "bytes");
  }
}

}  // namespace
}  // namespace pystrobe

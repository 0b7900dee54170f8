// The control socket protocol (daemon/control_protocol): frames, record
// requests and the profile encoding round-trip, and the request parser
// survives thousands of random and mutated buffers with an error, never a
// crash (run under the sanitizers when the build has them).
#include "daemon/control_protocol.h"

#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;

RecordRequest AllFor(absl::Duration duration) {
  RecordRequest request;
  request.all = true;
  request.duration = duration;
  request.rate_hz = 19;
  return request;
}

RecordRequest Pids() {
  RecordRequest request;
  request.pids = {1, 2};
  request.threads = true;
  return request;
}

std::string Frame(uint32_t magic, uint16_t version, uint16_t type, uint32_t length,
                  std::string_view payload) {
  ControlHeader header{magic, version, type, length, 0};
  return EncodeHeader(header) + std::string(payload);
}

TEST(ControlProtocolTest, RecordRequestsRoundTrip) {
  RecordRequest request;
  request.pids = {12, 345};
  request.duration = absl::Milliseconds(2500);
  request.rate_hz = 19;
  request.threads = true;
  request.offcpu = true;
  std::string frame = EncodeFrame(ControlMessageType::kRecord, EncodeRecordRequest(request));
  absl::StatusOr<ParsedRequest> parsed = ParseRequestFrame(frame);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->record, request);

  RecordRequest all;
  all.all = true;
  parsed = ParseRequestFrame(EncodeFrame(ControlMessageType::kRecord, EncodeRecordRequest(all)));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->record, all);
}

TEST(ControlProtocolTest, BadFramesAreRefusedSayingWhy) {
  std::string good = EncodeRecordRequest(AllFor(absl::Seconds(1)));
  uint16_t record = static_cast<uint16_t>(ControlMessageType::kRecord);
  auto error = [](const std::string& frame) {
    return std::string(ParseRequestFrame(frame).status().message());
  };
  EXPECT_THAT(error(Frame(0xdeadbeef, kControlVersion, record, good.size(), good)),
              HasSubstr("bad magic"));
  EXPECT_THAT(error(Frame(kControlMagic, 9, record, good.size(), good)),
              HasSubstr("protocol version 9"));
  EXPECT_THAT(error(Frame(kControlMagic, kControlVersion, record, kMaxRequestPayload + 1, "")),
              HasSubstr("at most 65536"));
  EXPECT_THAT(error(Frame(kControlMagic, kControlVersion, 77, good.size(), good)),
              HasSubstr("unknown request type 77"));
  EXPECT_THAT(error(Frame(kControlMagic, kControlVersion, record, good.size() + 5, good)),
              HasSubstr("truncated payload"));
  EXPECT_THAT(error("PSTB"), HasSubstr("truncated header"));
  auto payload_error = [&](std::string payload) {
    return error(EncodeFrame(ControlMessageType::kRecord, payload));
  };
  EXPECT_THAT(payload_error("all=1\nall=1\n"), HasSubstr("repeated key all"));
  EXPECT_THAT(payload_error("all=1\nbogus=1\n"), HasSubstr("unknown key bogus"));
  EXPECT_THAT(payload_error("pids=1,x\n"), HasSubstr("not a pid list"));
  EXPECT_THAT(payload_error("all=1\nduration_ms=-5\n"), HasSubstr("duration_ms"));
  EXPECT_THAT(payload_error("all=1\nrate_hz=100000\n"), HasSubstr("rate_hz"));
  EXPECT_THAT(payload_error("all=1\npids=3\n"), HasSubstr("exactly one of pids and all"));
  EXPECT_THAT(payload_error(std::string("all=1\n\0\xff", 8)), HasSubstr("not printable"));
}

TEST(ControlProtocolTest, ProfilesRoundTripWithKindsCountsAndLabels) {
  Profile profile;
  profile.title = "t";
  profile.sample_rate_hz = 19;
  profile.count_unit = "microseconds";
  profile.start_time = absl::FromUnixSeconds(1700000000);
  profile.duration = absl::Seconds(2);
  profile.labels.push_back({"env", "prod"});
  profile.process_labels[42] = {{"python_version", "3.11.7"}};
  profile.Add({{"python3 (42)", FrameKind::kProcess},
               {"main tid=42", FrameKind::kThread},
               {"f (a.py:3)", FrameKind::kPython},
               {"do_sys_open_[k]", FrameKind::kKernel}},
              7);
  profile.Add({{"python3 (42)", FrameKind::kProcess}, {"[native]", FrameKind::kMarker}}, 3);
  absl::StatusOr<Profile> back = DecodeProfile(EncodeProfile(profile));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->title, "t");
  EXPECT_EQ(back->sample_rate_hz, 19);
  EXPECT_EQ(back->count_unit, "microseconds");
  EXPECT_EQ(back->start_time, profile.start_time);
  EXPECT_EQ(back->duration, profile.duration);
  EXPECT_EQ(back->labels, profile.labels);
  EXPECT_EQ(back->process_labels.at(42), profile.process_labels.at(42));
  ASSERT_EQ(back->stacks().size(), 2u);
  EXPECT_EQ(back->stacks()[0].frames, profile.stacks()[0].frames);
  EXPECT_EQ(back->stacks()[0].count, 7u);
  EXPECT_EQ(back->total_count(), 10u);
}

TEST(ControlProtocolTest, RandomAndMutatedRequestsAreErrorsNotCrashes) {
  std::mt19937_64 random(20240601);
  std::vector<std::string> seeds = {
      EncodeFrame(ControlMessageType::kRecord, EncodeRecordRequest(Pids())),
      EncodeFrame(ControlMessageType::kRecord, EncodeRecordRequest(AllFor(absl::Seconds(3)))),
  };
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string buffer;
    if (i % 4 == 0) {
      // Pure garbage, sometimes behind a valid header prefix.
      size_t size = random() % 200;
      for (size_t j = 0; j < size; ++j) buffer.push_back(static_cast<char>(random()));
      if (i % 8 == 0) buffer = seeds[0].substr(0, random() % 16) + buffer;
    } else {
      buffer = seeds[random() % seeds.size()];
      int mutations = 1 + static_cast<int>(random() % 6);
      for (int m = 0; m < mutations; ++m) {
        size_t at = buffer.empty() ? 0 : random() % buffer.size();
        switch (random() % 4) {
          case 0:
            if (!buffer.empty()) buffer[at] = static_cast<char>(random());
            break;
          case 1:
            buffer.insert(at, 1, static_cast<char>(random()));
            break;
          case 2:
            buffer.erase(at, 1 + random() % 8);
            break;
          case 3:
            buffer.resize(random() % (buffer.size() + 1));
            break;
        }
      }
    }
    absl::StatusOr<ParsedRequest> parsed = ParseRequestFrame(buffer);
    if (parsed.ok()) {
      ++accepted;
      // Whatever parses is a request the daemon can serve as is.
      EXPECT_NE(parsed->record.all, !parsed->record.pids.empty());
    } else {
      EXPECT_FALSE(parsed.status().message().empty());
    }
    // The profile decoder gets the same treatment (the client reads it).
    (void)DecodeProfile(buffer);
  }
  EXPECT_LT(accepted, 20000);
}

TEST(ControlProtocolTest, MutatedProfilesAreErrorsNotCrashes) {
  Profile profile;
  profile.Add({{"p (1)", FrameKind::kProcess}, {"f", FrameKind::kNative}}, 5);
  profile.process_labels[1] = {{"k", "v"}};
  std::string good = EncodeProfile(profile);
  std::mt19937_64 random(7);
  for (int i = 0; i < 5000; ++i) {
    std::string buffer = good;
    buffer[random() % buffer.size()] = static_cast<char>(random());
    buffer.resize(random() % (buffer.size() + 1));
    (void)DecodeProfile(buffer);
  }
}

}  // namespace
}  // namespace pystrobe

// The control socket protocol (daemon/control/control_protocol): frames, record
// requests and the profile encoding round-trip, and the request parser
// survives thousands of random and mutated buffers with an error, never a
// crash (run under the sanitizers when the build has them).
#include "daemon/control/control_protocol.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

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
  request.rate_given = true;  // an explicit --rate travels; else the daemon's rate
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

// A profile recorded through the daemon keeps what pprof's mappings need.
TEST(ControlProtocolTest, NativeFramesKeepTheirModulesAndOffsets) {
  auto libc = std::make_shared<NativeModule>();
  libc->path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  libc->build_id = "93ac61ec5a8eb1396f9fbd350e3169a558528a40";
  libc->code_segments = {{.vaddr = 0x26000, .size = 0x1550fc, .file_offset = 0x26000}};
  auto kernel = std::make_shared<NativeModule>();
  kernel->path = "[kernel]";
  Profile profile;
  profile.Add({{"a (1)", FrameKind::kProcess},
               {"qsort", FrameKind::kNative, libc, 0x40000},
               {"libc.so.6+0x50000", FrameKind::kNative, libc, 0x50000},
               {"[unknown]", FrameKind::kNative},
               {"read_[k]", FrameKind::kKernel, kernel}},
              2);
  absl::StatusOr<Profile> back = DecodeProfile(EncodeProfile(profile));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->stacks().size(), 1u);
  const auto& frames = back->stacks()[0].frames;
  ASSERT_EQ(frames.size(), 5u);
  ASSERT_NE(frames[1].module, nullptr);
  EXPECT_EQ(*frames[1].module, *libc);
  EXPECT_EQ(frames[1].file_offset, 0x40000u);
  EXPECT_EQ(frames[2].module, frames[1].module) << "one record per module";
  EXPECT_EQ(frames[2].file_offset, 0x50000u);
  EXPECT_EQ(frames[3].module, nullptr);
  ASSERT_NE(frames[4].module, nullptr);
  EXPECT_EQ(frames[4].module->path, "[kernel]");
}

TEST(ControlProtocolTest, ProfileOfAnotherEncodingVersionSaysSo) {
  Profile profile;
  profile.Add({{"p (1)", FrameKind::kProcess}}, 1);
  std::string encoded = EncodeProfile(profile);
  encoded[4] = '1';  // "PSPF1": the encoding before modules
  absl::StatusOr<Profile> back = DecodeProfile(encoded);
  EXPECT_EQ(back.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(back.status().message(), HasSubstr("restart the daemon"));
}

TEST(ControlProtocolTest, RandomAndMutatedRequestsAreErrorsNotCrashes) {
  std::mt19937_64 random(20240601);
  std::vector<std::string> seeds = {
      EncodeFrame(ControlMessageType::kRecord, EncodeRecordRequest(Pids())),
      EncodeFrame(ControlMessageType::kRecord, EncodeRecordRequest(AllFor(absl::Seconds(3)))),
      EncodeFrame(ControlMessageType::kStat,
                  EncodeStatRequest({.pid = 42, .duration = absl::Seconds(2), .json = true})),
      EncodeFrame(ControlMessageType::kTop,
                  EncodeTopRequest({.pid = 7, .interval = absl::Seconds(1)})),
      EncodeFrame(ControlMessageType::kTop,
                  EncodeTopRequest({.pid = std::nullopt, .interval = absl::Seconds(2)})),
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
      if (parsed->type == ControlMessageType::kRecord) {
        EXPECT_NE(parsed->record.all, !parsed->record.pids.empty());
      } else if (parsed->type == ControlMessageType::kStat) {
        EXPECT_GT(parsed->stat.pid, 0u);
        EXPECT_GT(parsed->stat.duration, absl::ZeroDuration());
        EXPECT_LE(parsed->stat.duration, kMaxRemoteRecording);
      } else {
        ASSERT_EQ(parsed->type, ControlMessageType::kTop);
        EXPECT_GE(parsed->top.interval, kMinTopInterval);
        EXPECT_LE(parsed->top.interval, kMaxTopInterval);
      }
    } else {
      EXPECT_FALSE(parsed.status().message().empty());
    }
    // The profile and top decoders get the same treatment (the client reads them).
    (void)DecodeProfile(buffer);
    (void)DecodeTopSnapshot(buffer, 4);
  }
  EXPECT_LT(accepted, 20000);
}

TEST(ControlProtocolTest, StatAndTopRequestsRoundTripAndAreStrict) {
  StatRequest stat{.pid = 1234, .duration = absl::Milliseconds(2500), .json = true};
  absl::StatusOr<ParsedRequest> parsed =
      ParseRequestFrame(EncodeFrame(ControlMessageType::kStat, EncodeStatRequest(stat)));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->type, ControlMessageType::kStat);
  EXPECT_EQ(parsed->stat, stat);
  TopRequest top{.pid = 9, .interval = absl::Milliseconds(500)};
  parsed = ParseRequestFrame(EncodeFrame(ControlMessageType::kTop, EncodeTopRequest(top)));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->type, ControlMessageType::kTop);
  EXPECT_EQ(parsed->top, top);

  for (const char* bad : {"", "pid=1\n", "duration_ms=10\n", "pid=0\nduration_ms=10\n",
                          "pid=1\nduration_ms=0\n", "pid=1\nduration_ms=3600001\n",
                          "pid=1\nduration_ms=10\njson=2\n", "pid=1\nduration_ms=10\nx=1\n",
                          "pid=1\npid=1\nduration_ms=10\n", "pid=-1\nduration_ms=10\n",
                          "pid=1\nduration_ms=10\nall=1\n", "pid=1,2\nduration_ms=10\n"}) {
    EXPECT_FALSE(ParseStatRequest(bad).ok()) << bad;
  }
  for (const char* bad : {"", "pid=1\n", "interval_ms=99\n", "interval_ms=60001\n",
                          "interval_ms=1000\npid=0\n", "interval_ms=1000\nsort=cpu\n",
                          "interval_ms=1000\ninterval_ms=1000\n", "interval_ms=1e3\n"}) {
    EXPECT_FALSE(ParseTopRequest(bad).ok()) << bad;
  }
  // A truncated stat frame is an error.
  std::string frame = EncodeFrame(ControlMessageType::kStat, EncodeStatRequest(stat));
  EXPECT_FALSE(ParseRequestFrame(frame.substr(0, frame.size() - 1)).ok());
}

TEST(ControlProtocolTest, TopSnapshotRoundTripsAndMutationsAreErrorsNotCrashes) {
  TopSnapshot snapshot;
  snapshot.title = "all processes";
  snapshot.interval_seconds = 1.5;
  snapshot.cpus = 8;
  snapshot.function_samples = 12;
  snapshot.rows.push_back({.pid = 1,
                           .tid = 0,
                           .comm = "init",
                           .exited = false,
                           .counters = {1, 2, 3, 4},
                           .rss_known = true,
                           .rss_bytes = 12345678});
  snapshot.rows.push_back({.pid = 2,
                           .tid = 3,
                           .comm = "python3.14t",
                           .exited = true,
                           .free_threaded = true,
                           .counters = {5, 6, 7, 8}});
  snapshot.functions.push_back({.name = "f (a.py:1)", .samples = 12});
  snapshot.process_rss_known = true;
  snapshot.process_rss_bytes = 1 << 30;
  std::string good = EncodeTopSnapshot(snapshot);
  absl::StatusOr<TopSnapshot> back = DecodeTopSnapshot(good, 4);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, snapshot);
  // Rows with another number of counters than the client knows: refused.
  EXPECT_FALSE(DecodeTopSnapshot(good, 5).ok());
  EXPECT_FALSE(DecodeTopSnapshot(good.substr(0, good.size() - 1), 4).ok());
  // A known flag other than 0 or 1: refused.
  std::string bad_flag = good;
  bad_flag[good.size() - 9] = 2;
  EXPECT_FALSE(DecodeTopSnapshot(bad_flag, 4).ok());
  // A row flag this version does not know: refused. The flags byte is where
  // the encodings with and without the free-threaded flag differ.
  TopSnapshot with_gil = snapshot;
  with_gil.rows[1].free_threaded = false;
  const std::string gil = EncodeTopSnapshot(with_gil);
  ASSERT_EQ(gil.size(), good.size());
  size_t flags_at = 0;
  while (gil[flags_at] == good[flags_at]) ++flags_at;
  std::string unknown_flag = good;
  unknown_flag[flags_at] |= 4;
  EXPECT_FALSE(DecodeTopSnapshot(unknown_flag, 4).ok());
  // A snapshot of the encoding before memory (PSTP1): refused, not misread.
  std::string older = good;
  older[4] = '1';
  EXPECT_FALSE(DecodeTopSnapshot(older, 4).ok());
  std::mt19937_64 random(11);
  for (int i = 0; i < 5000; ++i) {
    std::string buffer = good;
    buffer[random() % buffer.size()] = static_cast<char>(random());
    buffer.resize(random() % (buffer.size() + 1));
    (void)DecodeTopSnapshot(buffer, 4);
  }
}

TEST(ControlProtocolTest, TopSnapshotGpuSectionRoundTripsOnlyWhereThereIsOne) {
  TopSnapshot snapshot;
  snapshot.title = "all processes";
  snapshot.rows.push_back(
      {.pid = 7, .tid = 0, .comm = "train", .exited = false, .counters = {1, 2, 3, 4}});
  std::string without = EncodeTopSnapshot(snapshot);
  snapshot.gpu = true;
  snapshot.gpu_devices.push_back({.index = 0,
                                  .name = "NVIDIA H100",
                                  .utilization = 0.75,
                                  .memory_used_bytes = 2000,
                                  .memory_total_bytes = 8000});
  snapshot.gpu_processes.push_back({.pid = 7, .utilization = 0.74, .memory_bytes = 1400});
  std::string with = EncodeTopSnapshot(snapshot);
  // A host without NVML sends what it always sent.
  EXPECT_EQ(with.substr(0, without.size()), without);
  absl::StatusOr<TopSnapshot> back = DecodeTopSnapshot(with, 4);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, snapshot);
  absl::StatusOr<TopSnapshot> old = DecodeTopSnapshot(without, 4);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_FALSE(old->gpu);
  EXPECT_FALSE(DecodeTopSnapshot(with.substr(0, with.size() - 1), 4).ok());
  // A utilization that is not a share is refused.
  snapshot.gpu_devices[0].utilization = 2;
  EXPECT_FALSE(DecodeTopSnapshot(EncodeTopSnapshot(snapshot), 4).ok());
  std::mt19937_64 random(13);
  for (int i = 0; i < 5000; ++i) {
    std::string buffer = with;
    buffer[random() % buffer.size()] = static_cast<char>(random());
    buffer.resize(random() % (buffer.size() + 1));
    (void)DecodeTopSnapshot(buffer, 4);
  }
}

TEST(ControlProtocolTest, MutatedProfilesAreErrorsNotCrashes) {
  Profile profile;
  auto module = std::make_shared<NativeModule>();
  module->path = "/lib/libf.so";
  module->build_id = "abcd";
  module->code_segments = {{.vaddr = 0x1000, .size = 0x2000, .file_offset = 0x1000}};
  profile.Add({{"p (1)", FrameKind::kProcess},
               {"f", FrameKind::kNative},
               {"g", FrameKind::kNative, module, 0x1234}},
              5);
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

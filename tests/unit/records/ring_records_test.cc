// The ring buffer's records, byte for byte as the kernel writes them, decoded
// into what the recorder, the unwind tracker, the accounting and the BPF
// tests read; malformed ones refused, and counted by the stream's decoder.
#include <cstddef>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "bpf/pystrobe_abi.h"
#include "daemon/records/record_decoder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
std::vector<uint8_t> BytesOf(const T& value, size_t size = sizeof(T)) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
  return std::vector<uint8_t>(bytes, bytes + size);
}

// A sample of `kind` with two kernel, three user and two Python frames, cut
// to the words used as the kernel sends it.
std::vector<uint8_t> FullSample(uint32_t kind) {
  static pystrobe_sample sample;
  sample = {};
  sample.kind = kind;
  sample.pid = 100;
  sample.tid = 101;
  sample.cpu = 3;
  sample.time_ns = 123456789;
  sample.cgroup_id = 77;
  std::memcpy(sample.comm, "worker", 6);
  sample.flags = PYSTROBE_SAMPLE_HOLDS_GIL | PYSTROBE_SAMPLE_PY_TRUNCATED;
  sample.kernel_frames = 2;
  sample.user_frames = 3;
  sample.python_frames = 2;
  sample.python_status = PYSTROBE_PY_WALKED;
  sample.offcpu_reason = PYSTROBE_OFFCPU_IO;
  sample.weight_ns = 4096;
  sample.address = 0x7f0000001000;
  const uint64_t words[] = {0xffffffff81000010,
                            0xffffffff81000020,  // kernel
                            0x401000,
                            0x401100,
                            0x401200,  // user
                            0x7f1000000000 | PYSTROBE_PY_FRAME_ENTRY,
                            uint64_t{0xabcd} | (uint64_t{static_cast<uint32_t>(-2)} << 32),
                            0x7f1000000100,
                            uint64_t{0x1234} | (uint64_t{40} << 32)};
  std::memcpy(sample.data, words, sizeof(words));
  return BytesOf(sample, offsetof(pystrobe_sample, data) + sizeof(words));
}

TEST(RingRecordsTest, EverySampleKindKeepsItsHeaderAndFramesWordForWord) {
  for (uint32_t kind : {PYSTROBE_EVENT_SAMPLE, PYSTROBE_EVENT_OFFCPU, PYSTROBE_EVENT_MEMORY,
                        PYSTROBE_EVENT_ALLOC, PYSTROBE_EVENT_OOM_KILLED}) {
    absl::StatusOr<RingRecord> record = DecodeRingRecord(FullSample(kind));
    ASSERT_TRUE(record.ok()) << record.status();
    const auto* sample = std::get_if<SampleRecord>(&*record);
    ASSERT_NE(sample, nullptr) << "kind " << kind;
    EXPECT_EQ(sample->kind, kind);
    EXPECT_EQ(sample->pid, 100u);
    EXPECT_EQ(sample->tid, 101u);
    EXPECT_EQ(sample->cpu, 3u);
    EXPECT_EQ(sample->time_ns, 123456789u);
    EXPECT_EQ(sample->cgroup_id, 77u);
    EXPECT_EQ(sample->comm, "worker");
    EXPECT_EQ(sample->flags, PYSTROBE_SAMPLE_HOLDS_GIL | PYSTROBE_SAMPLE_PY_TRUNCATED);
    EXPECT_EQ(sample->python_status, PYSTROBE_PY_WALKED);
    EXPECT_EQ(sample->offcpu_reason, PYSTROBE_OFFCPU_IO);
    EXPECT_EQ(sample->weight_ns, 4096u);
    EXPECT_EQ(sample->address, 0x7f0000001000u);
    EXPECT_THAT(sample->kernel_ips, ElementsAre(0xffffffff81000010, 0xffffffff81000020));
    EXPECT_THAT(sample->user_ips, ElementsAre(0x401000, 0x401100, 0x401200));
    // The entry bit comes off the address; a negative offset stays negative.
    EXPECT_THAT(
        sample->python_frames,
        ElementsAre(
            PythonFrameRecord{
                .code = 0x7f1000000000, .stamp = 0xabcd, .instr_offset = -2, .eval_entry = true},
            PythonFrameRecord{
                .code = 0x7f1000000100, .stamp = 0x1234, .instr_offset = 40, .eval_entry = false}));
  }
}

TEST(RingRecordsTest, AFullLengthCommIsKeptWithoutItsMissingTerminator) {
  std::vector<uint8_t> bytes = FullSample(PYSTROBE_EVENT_SAMPLE);
  std::memcpy(bytes.data() + offsetof(pystrobe_sample, comm), "0123456789abcdef", 16);
  absl::StatusOr<RingRecord> record = DecodeRingRecord(bytes);
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(std::get<SampleRecord>(*record).comm, "0123456789abcdef");
}

TEST(RingRecordsTest, ProcessEventsFreesAndCodeCopiesDecodeToTheirOwnTypes) {
  for (uint32_t kind : {PYSTROBE_EVENT_EXEC, PYSTROBE_EVENT_EXIT}) {
    pystrobe_process_event event = {};
    event.kind = kind;
    event.pid = 42;
    event.time_ns = 99;
    std::strcpy(event.comm, "python3");
    absl::StatusOr<RingRecord> record = DecodeRingRecord(BytesOf(event));
    ASSERT_TRUE(record.ok()) << record.status();
    const auto* process = std::get_if<ProcessEventRecord>(&*record);
    ASSERT_NE(process, nullptr);
    EXPECT_EQ(process->kind, kind);
    EXPECT_EQ(process->pid, 42u);
    EXPECT_EQ(process->time_ns, 99u);
    EXPECT_EQ(process->comm, "python3");
    EXPECT_FALSE(process->python_executable.has_value());
  }

  // An exec of an executable the kernel knew as CPython's says which file
  // and where its text went.
  pystrobe_process_event exec = {};
  exec.kind = PYSTROBE_EVENT_EXEC;
  exec.pid = 42;
  exec.python_binary_dev = 0x800001;
  exec.python_binary_inode = 1234;
  exec.start_code = 0x55d0c0de0000;
  absl::StatusOr<RingRecord> known = DecodeRingRecord(BytesOf(exec));
  ASSERT_TRUE(known.ok()) << known.status();
  EXPECT_EQ(std::get<ProcessEventRecord>(*known).python_executable,
            (PythonExecutable{.dev = 0x800001, .inode = 1234, .start_code = 0x55d0c0de0000}));

  pystrobe_finalize_event finalize = {};
  finalize.kind = PYSTROBE_EVENT_FINALIZE;
  finalize.pid = 9;
  absl::StatusOr<RingRecord> finalized = DecodeRingRecord(BytesOf(finalize));
  ASSERT_TRUE(finalized.ok()) << finalized.status();
  ASSERT_TRUE(std::holds_alternative<FinalizeRecord>(*finalized));
  EXPECT_EQ(std::get<FinalizeRecord>(*finalized).pid, 9u);

  pystrobe_free_event free_event = {.kind = PYSTROBE_EVENT_FREE, .pid = 7, .address = 0x5000};
  absl::StatusOr<RingRecord> freed = DecodeRingRecord(BytesOf(free_event));
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_EQ(std::get<FreeRecord>(*freed).pid, 7u);
  EXPECT_EQ(std::get<FreeRecord>(*freed).address, 0x5000u);

  static pystrobe_python_code_event code = {};
  code.kind = PYSTROBE_EVENT_PYTHON_CODE;
  code.pid = 8;
  code.code = 0x9000;
  code.stamp = 0x55;
  code.regions_used = 1;
  code.regions[0] = {.address = 0x9000, .size = 4, .offset = 0};
  std::memcpy(code.data, "\x01\x02\x03\x04", 4);
  absl::StatusOr<RingRecord> copied =
      DecodeRingRecord(BytesOf(code, offsetof(pystrobe_python_code_event, data) + 8));
  ASSERT_TRUE(copied.ok()) << copied.status();
  const auto& copy = std::get<PythonCodeCopy>(*copied);
  EXPECT_EQ(copy.pid, 8u);
  EXPECT_EQ(copy.code, 0x9000u);
  EXPECT_EQ(copy.stamp, 0x55u);
  uint8_t byte = 0;
  ASSERT_TRUE(copy.memory.Read(0x9003, &byte, 1).ok());
  EXPECT_EQ(byte, 4);
}

TEST(RingRecordsTest, MalformedRecordsAreRefusedSayingWhy) {
  EXPECT_THAT(DecodeRingRecord(std::vector<uint8_t>{1, 0}).status().message(),
              HasSubstr("too short for its kind"));
  uint32_t unknown = 99;
  EXPECT_THAT(DecodeRingRecord(BytesOf(unknown)).status().message(), HasSubstr("unknown kind 99"));

  std::vector<uint8_t> sample = FullSample(PYSTROBE_EVENT_SAMPLE);
  EXPECT_THAT(DecodeRingRecord(std::span(sample).first(40)).status().message(),
              HasSubstr("shorter than its header"));
  // One word short of the frames it claims.
  EXPECT_THAT(DecodeRingRecord(std::span(sample).first(sample.size() - 8)).status().message(),
              HasSubstr("too short for its 9 words"));
  // Counts beyond what the kernel writes, whatever the record's size.
  for (size_t field :
       {offsetof(pystrobe_sample, kernel_frames), offsetof(pystrobe_sample, user_frames),
        offsetof(pystrobe_sample, python_frames)}) {
    std::vector<uint8_t> too_deep = sample;
    uint16_t frames = 1000;
    std::memcpy(too_deep.data() + field, &frames, sizeof(frames));
    EXPECT_THAT(DecodeRingRecord(too_deep).status().message(), HasSubstr("more than the kernel"))
        << "field at " << field;
  }

  pystrobe_process_event exec = {};
  exec.kind = PYSTROBE_EVENT_EXEC;
  std::vector<uint8_t> exec_bytes = BytesOf(exec);
  exec_bytes.pop_back();
  EXPECT_THAT(DecodeRingRecord(exec_bytes).status().message(), HasSubstr("too short"));
  pystrobe_free_event free_event = {.kind = PYSTROBE_EVENT_FREE, .pid = 1, .address = 8};
  std::vector<uint8_t> free_bytes = BytesOf(free_event);
  free_bytes.resize(12);
  EXPECT_THAT(DecodeRingRecord(free_bytes).status().message(), HasSubstr("too short"));
  uint32_t code_kind = PYSTROBE_EVENT_PYTHON_CODE;
  EXPECT_FALSE(DecodeRingRecord(BytesOf(code_kind)).ok());
}

TEST(RingRecordsTest, ASampleDecodedIntoAReusedRecordKeepsNothingOfTheLastOne) {
  RingRecord reused;
  ASSERT_TRUE(DecodeRingRecordInto(FullSample(PYSTROBE_EVENT_SAMPLE), reused).ok());
  // A shorter sample of another thread: one user frame, no kernel or Python ones.
  pystrobe_sample shorter = {};
  shorter.kind = PYSTROBE_EVENT_OFFCPU;
  shorter.pid = 7;
  shorter.tid = 8;
  std::memcpy(shorter.comm, "sh", 2);
  shorter.user_frames = 1;
  shorter.data[0] = 0x500000;
  ASSERT_TRUE(
      DecodeRingRecordInto(BytesOf(shorter, offsetof(pystrobe_sample, data) + 8), reused).ok());
  const auto* sample = std::get_if<SampleRecord>(&reused);
  ASSERT_NE(sample, nullptr);
  EXPECT_EQ(sample->kind, PYSTROBE_EVENT_OFFCPU);
  EXPECT_EQ(sample->pid, 7u);
  EXPECT_EQ(sample->comm, "sh");
  EXPECT_EQ(sample->flags, 0u);
  EXPECT_TRUE(sample->kernel_ips.empty());
  EXPECT_THAT(sample->user_ips, ElementsAre(0x500000u));
  EXPECT_TRUE(sample->python_frames.empty());

  // Another kind in between, then a sample again.
  pystrobe_finalize_event finalize = {.kind = PYSTROBE_EVENT_FINALIZE, .pid = 9, .time_ns = 1};
  ASSERT_TRUE(DecodeRingRecordInto(BytesOf(finalize), reused).ok());
  EXPECT_TRUE(std::holds_alternative<FinalizeRecord>(reused));
  ASSERT_TRUE(DecodeRingRecordInto(FullSample(PYSTROBE_EVENT_SAMPLE), reused).ok());
  absl::StatusOr<RingRecord> fresh = DecodeRingRecord(FullSample(PYSTROBE_EVENT_SAMPLE));
  ASSERT_TRUE(fresh.ok());
  const auto& a = std::get<SampleRecord>(reused);
  const auto& b = std::get<SampleRecord>(*fresh);
  EXPECT_EQ(a.comm, b.comm);
  EXPECT_EQ(a.kernel_ips, b.kernel_ips);
  EXPECT_EQ(a.user_ips, b.user_ips);
  EXPECT_EQ(a.python_frames, b.python_frames);
}

// Every way a record can be cut short or lie, one of each kind: the decoder
// hands none of them on, counts each once, and goes on with the next.
TEST(RecordDecoderTest, MalformedAndTruncatedRecordsAreCountedAndHandedToNoReader) {
  std::vector<std::vector<uint8_t>> bad;
  bad.push_back({});
  bad.push_back({1, 0});
  uint32_t unknown = 99;
  bad.push_back(BytesOf(unknown));
  for (uint32_t kind : {PYSTROBE_EVENT_SAMPLE, PYSTROBE_EVENT_OFFCPU, PYSTROBE_EVENT_MEMORY,
                        PYSTROBE_EVENT_ALLOC, PYSTROBE_EVENT_OOM_KILLED}) {
    std::vector<uint8_t> sample = FullSample(kind);
    bad.emplace_back(sample.begin(), sample.begin() + offsetof(pystrobe_sample, data) - 1);
    bad.emplace_back(sample.begin(), sample.end() - 1);  // half a Python frame gone
    std::vector<uint8_t> lying = sample;
    uint16_t frames = PYSTROBE_MAX_PYTHON_FRAMES + 1;
    std::memcpy(lying.data() + offsetof(pystrobe_sample, python_frames), &frames, sizeof(frames));
    bad.push_back(lying);
  }
  for (uint32_t kind : {PYSTROBE_EVENT_EXEC, PYSTROBE_EVENT_EXIT}) {
    pystrobe_process_event event = {};
    event.kind = kind;
    bad.push_back(BytesOf(event, sizeof(event) - 1));
  }
  pystrobe_free_event free_event = {.kind = PYSTROBE_EVENT_FREE, .pid = 1, .address = 8};
  bad.push_back(BytesOf(free_event, sizeof(free_event) - 1));
  pystrobe_finalize_event finalize = {.kind = PYSTROBE_EVENT_FINALIZE, .pid = 1, .time_ns = 1};
  bad.push_back(BytesOf(finalize, 8));
  static pystrobe_python_code_event code = {};
  code.kind = PYSTROBE_EVENT_PYTHON_CODE;
  code.regions_used = 1;
  code.regions[0] = {.address = 0x9000, .size = 4, .offset = 0};
  bad.push_back(BytesOf(code, offsetof(pystrobe_python_code_event, data) + 3));

  RecordDecoder decoder;
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(decoder.Decode(bad[i]), nullptr) << "record " << i;
    EXPECT_EQ(decoder.malformed(), i + 1);
  }
  // A good record after them is handed on whole.
  RingRecord* good = decoder.Decode(FullSample(PYSTROBE_EVENT_SAMPLE));
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(std::get<SampleRecord>(*good).pid, 100u);
  EXPECT_EQ(decoder.malformed(), bad.size());
}

TEST(RecordDecoderTest, EveryKindComesOutAsItsTypeFromOneReusedRecord) {
  RecordDecoder decoder;
  RingRecord* first = decoder.Decode(FullSample(PYSTROBE_EVENT_ALLOC));
  ASSERT_NE(first, nullptr);
  const SampleRecord& sample = std::get<SampleRecord>(*first);
  EXPECT_EQ(sample.kind, static_cast<uint32_t>(PYSTROBE_EVENT_ALLOC));
  EXPECT_EQ(sample.address, 0x7f0000001000u);

  pystrobe_free_event free_event = {.kind = PYSTROBE_EVENT_FREE, .pid = 7, .address = 0x5000};
  RingRecord* freed = decoder.Decode(BytesOf(free_event));
  ASSERT_NE(freed, nullptr);
  EXPECT_EQ(freed, first) << "one record, decoded into again";
  EXPECT_EQ(std::get<FreeRecord>(*freed).address, 0x5000u);

  pystrobe_process_event exit = {};
  exit.kind = PYSTROBE_EVENT_EXIT;
  exit.pid = 42;
  std::strcpy(exit.comm, "python3");
  RingRecord* exited = decoder.Decode(BytesOf(exit));
  ASSERT_NE(exited, nullptr);
  EXPECT_EQ(std::get<ProcessEventRecord>(*exited).comm, "python3");

  // Two samples in a row: the second one's frames go where the first's were.
  ASSERT_NE(decoder.Decode(FullSample(PYSTROBE_EVENT_SAMPLE)), nullptr);
  const uint64_t* kernel_buffer = std::get<SampleRecord>(*exited).kernel_ips.data();
  RingRecord* again = decoder.Decode(FullSample(PYSTROBE_EVENT_OFFCPU));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(std::get<SampleRecord>(*again).kernel_ips.data(), kernel_buffer);
  EXPECT_EQ(std::get<SampleRecord>(*again).kind, static_cast<uint32_t>(PYSTROBE_EVENT_OFFCPU));
  EXPECT_EQ(decoder.malformed(), 0u);
}

}  // namespace
}  // namespace pystrobe

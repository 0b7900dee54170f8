#include "daemon/python/code_copies.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "bpf/pystrobe_abi.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;

struct RegionSpec {
  uint64_t address;
  std::vector<uint8_t> bytes;
};

// A PYSTROBE_EVENT_PYTHON_CODE record as the kernel lays it out: only the
// used part of data is sent.
std::vector<uint8_t> CodeRecord(uint32_t pid, uint64_t code, uint32_t stamp,
                                const std::vector<RegionSpec>& regions) {
  pystrobe_python_code_event header = {};
  header.kind = PYSTROBE_EVENT_PYTHON_CODE;
  header.pid = pid;
  header.code = code;
  header.stamp = stamp;
  header.regions_used = static_cast<uint32_t>(regions.size());
  std::vector<uint8_t> data;
  for (size_t i = 0; i < regions.size(); ++i) {
    header.regions[i].address = regions[i].address;
    header.regions[i].size = static_cast<uint32_t>(regions[i].bytes.size());
    header.regions[i].offset = static_cast<uint32_t>(data.size());
    data.insert(data.end(), regions[i].bytes.begin(), regions[i].bytes.end());
    data.resize((data.size() + 7) & ~size_t{7});
  }
  constexpr size_t kHeaderSize = offsetof(pystrobe_python_code_event, data);
  std::vector<uint8_t> record(kHeaderSize + data.size());
  std::memcpy(record.data(), &header, kHeaderSize);
  if (!data.empty()) std::memcpy(record.data() + kHeaderSize, data.data(), data.size());
  return record;
}

TEST(CodeCopiesTest, ReadsInsideARegionAndRefusesAnythingElse) {
  absl::StatusOr<PythonCodeCopy> copy = ParsePythonCodeCopy(
      CodeRecord(42, 0x1000, 7, {{0x1000, {1, 2, 3, 4, 5, 6, 7, 8, 9}}, {0x5000, {0xaa, 0xbb}}}));
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->pid, 42u);
  EXPECT_EQ(copy->code, 0x1000u);
  EXPECT_EQ(copy->stamp, 7u);

  uint8_t out[9] = {};
  ASSERT_TRUE(copy->memory.Read(0x1002, out, 3).ok());
  EXPECT_EQ(out[0], 3);
  EXPECT_EQ(out[2], 5);
  ASSERT_TRUE(copy->memory.Read(0x1000, out, 9).ok());
  ASSERT_TRUE(copy->memory.Read(0x5001, out, 1).ok());
  EXPECT_EQ(out[0], 0xbb);

  // Past a region's end, before its start, across two regions, in no region.
  EXPECT_THAT(copy->memory.Read(0x1008, out, 2).message(), HasSubstr("not in the kernel's copy"));
  EXPECT_FALSE(copy->memory.Read(0xfff, out, 2).ok());
  EXPECT_FALSE(copy->memory.Read(0x1000, out, 0x4002).ok());
  EXPECT_FALSE(copy->memory.Read(0x9000, out, 1).ok());
  EXPECT_FALSE(copy->memory.Read(UINT64_MAX, out, 2).ok());
}

TEST(CodeCopiesTest, MalformedRecordsAreRefusedWithAReason) {
  std::vector<uint8_t> good = CodeRecord(1, 0x1000, 1, {{0x1000, {1, 2, 3, 4}}});

  std::vector<uint8_t> short_record(good.begin(), good.begin() + 10);
  EXPECT_THAT(ParsePythonCodeCopy(short_record).status().message(),
              HasSubstr("shorter than its header"));

  std::vector<uint8_t> too_many = good;
  uint32_t regions = PYSTROBE_CODE_REGIONS + 1;
  std::memcpy(too_many.data() + offsetof(pystrobe_python_code_event, regions_used), &regions,
              sizeof(regions));
  EXPECT_THAT(ParsePythonCodeCopy(too_many).status().message(), HasSubstr("regions"));

  // A region that claims more bytes than the record holds, or starts past it
  // (an offset near 2^32 must not wrap around).
  for (uint32_t offset : {0u, 4u, UINT32_MAX}) {
    std::vector<uint8_t> past = good;
    uint32_t size = offset == 0 ? 64 : 8;
    const size_t region = offsetof(pystrobe_python_code_event, regions);
    std::memcpy(past.data() + region + offsetof(pystrobe_memory_region, size), &size, sizeof(size));
    std::memcpy(past.data() + region + offsetof(pystrobe_memory_region, offset), &offset,
                sizeof(offset));
    EXPECT_THAT(ParsePythonCodeCopy(past).status().message(), HasSubstr("runs past"))
        << "offset " << offset;
  }
}

TEST(CodeCopiesTest, ACopyIsTakenOnceAndForgottenWithItsProcess) {
  PythonCodeCopies copies;
  for (uint32_t pid : {10u, 11u}) {
    for (uint64_t code : {0x1000u, 0x2000u}) {
      absl::StatusOr<PythonCodeCopy> copy =
          ParsePythonCodeCopy(CodeRecord(pid, code, 5, {{code, {1, 2, 3}}}));
      ASSERT_TRUE(copy.ok());
      copies.Add(std::move(*copy));
    }
  }
  EXPECT_EQ(copies.size(), 4u);
  EXPECT_EQ(copies.bytes(), 12u);
  EXPECT_FALSE(copies.Take(10, 0x1000, 6).has_value()) << "another stamp is another object";
  std::optional<CopiedMemory> taken = copies.Take(10, 0x1000, 5);
  ASSERT_TRUE(taken.has_value());
  uint8_t byte = 0;
  EXPECT_TRUE(taken->Read(0x1002, &byte, 1).ok());
  EXPECT_EQ(byte, 3);
  EXPECT_FALSE(copies.Take(10, 0x1000, 5).has_value()) << "taken already";

  copies.ForgetProcess(10);
  EXPECT_FALSE(copies.Take(10, 0x2000, 5).has_value());
  EXPECT_TRUE(copies.Take(11, 0x2000, 5).has_value()) << "another process's copies stay";
  EXPECT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies.bytes(), 3u);
  copies.ForgetProcess(UINT32_MAX);  // the last possible pid: nothing past it to erase
  EXPECT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies.received(), 4u);
  EXPECT_EQ(copies.dropped(), 0u);
}

TEST(CodeCopiesTest, CopiesBeyondTheBoundAreCountedAsDropped) {
  PythonCodeCopies copies;
  for (uint64_t i = 0; i < PythonCodeCopies::kMaxCopies + 3; ++i) {
    absl::StatusOr<PythonCodeCopy> copy =
        ParsePythonCodeCopy(CodeRecord(1, 0x1000 + 16 * i, 1, {{0x1000 + 16 * i, {1}}}));
    ASSERT_TRUE(copy.ok());
    copies.Add(std::move(*copy));
  }
  EXPECT_EQ(copies.size(), PythonCodeCopies::kMaxCopies);
  EXPECT_EQ(copies.dropped(), 3u);
  EXPECT_EQ(copies.received(), PythonCodeCopies::kMaxCopies + 3);
}

TEST(CodeCopiesTest, BytesBeyondTheBoundAreCountedAsDropped) {
  PythonCodeCopies copies;
  const std::vector<uint8_t> big(PYSTROBE_CODE_REGION_MAX, 0x5a);
  size_t added = 0;
  for (uint64_t i = 0; added + big.size() <= PythonCodeCopies::kMaxBytes; ++i) {
    absl::StatusOr<PythonCodeCopy> copy =
        ParsePythonCodeCopy(CodeRecord(1, 0x100000 * (i + 1), 1, {{0x100000 * (i + 1), big}}));
    ASSERT_TRUE(copy.ok());
    copies.Add(std::move(*copy));
    added += big.size();
  }
  EXPECT_EQ(copies.dropped(), 0u);
  absl::StatusOr<PythonCodeCopy> one_more =
      ParsePythonCodeCopy(CodeRecord(2, 0x1000, 1, {{0x1000, big}}));
  ASSERT_TRUE(one_more.ok());
  copies.Add(std::move(*one_more));
  EXPECT_EQ(copies.dropped(), 1u);
  EXPECT_LE(copies.bytes(), PythonCodeCopies::kMaxBytes);
  copies.ForgetProcess(1);
  EXPECT_EQ(copies.bytes(), 0u);
}

}  // namespace
}  // namespace pystrobe

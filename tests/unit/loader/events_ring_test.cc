// How big the events ring buffer is made for a host and a recording.
#include <cstdint>

#include "daemon/loader/bpf_sampler.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

constexpr uint32_t kMiB = 1 << 20;

SamplerConfig AtRate(int rate_hz) {
  SamplerConfig config;
  config.rate_hz = rate_hz;
  return config;
}

TEST(EventsRingBytesTest, SmallHostAtTheDefaultRateGetsTheSmallestRing) {
  EXPECT_EQ(EventsRingBytes(AtRate(99), 1), 1 * kMiB);
  EXPECT_EQ(EventsRingBytes(AtRate(99), 2), 1 * kMiB);
  EXPECT_EQ(EventsRingBytes(AtRate(19), 2), 1 * kMiB);
}

TEST(EventsRingBytesTest, GrowsWithCpusAsAPowerOfTwo) {
  EXPECT_EQ(EventsRingBytes(AtRate(99), 3), 2 * kMiB);
  EXPECT_EQ(EventsRingBytes(AtRate(99), 16), 8 * kMiB);
  EXPECT_EQ(EventsRingBytes(AtRate(99), 64), 32 * kMiB);
}

TEST(EventsRingBytesTest, HoldsTwoSecondsOfAFastRate) {
  // 1000 Hz: 5,120,000 bytes a CPU, 10.24 MB for two.
  EXPECT_EQ(EventsRingBytes(AtRate(1000), 2), 16 * kMiB);
}

TEST(EventsRingBytesTest, EventDrivenRecordsKeepEightMiB) {
  SamplerConfig offcpu = AtRate(99);
  offcpu.offcpu = true;
  EXPECT_EQ(EventsRingBytes(offcpu, 2), 8 * kMiB);
  SamplerConfig allocations = AtRate(99);
  allocations.allocations = true;
  EXPECT_EQ(EventsRingBytes(allocations, 2), 8 * kMiB);
  SamplerConfig memory = AtRate(99);
  memory.memory_growth = true;
  EXPECT_EQ(EventsRingBytes(memory, 64), 32 * kMiB);
}

TEST(EventsRingBytesTest, StaysWithinBounds) {
  EXPECT_EQ(EventsRingBytes(AtRate(0), 0), 1 * kMiB);
  EXPECT_EQ(EventsRingBytes(AtRate(100000), 1024), 256 * kMiB);
}

}  // namespace
}  // namespace pystrobe

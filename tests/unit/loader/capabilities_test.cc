#include "daemon/loader/capabilities.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t Bit(int capability) { return uint64_t{1} << capability; }
constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

TEST(CapabilitiesTest, SysAdminAloneIsEnough) {
  EXPECT_TRUE(CheckProfilingCapabilities(CapabilitySet(Bit(kCapSysAdmin))).ok());
}

TEST(CapabilitiesTest, BpfAndPerfmonAreEnough) {
  EXPECT_TRUE(CheckProfilingCapabilities(CapabilitySet(Bit(kCapBpf) | Bit(kCapPerfmon))).ok());
}

TEST(CapabilitiesTest, MissingCapabilityIsNamedWithHowToGrantIt) {
  absl::Status no_bpf = CheckProfilingCapabilities(CapabilitySet(Bit(kCapPerfmon)));
  EXPECT_EQ(no_bpf.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(no_bpf.message(), HasSubstr("missing capability CAP_BPF"));
  EXPECT_THAT(no_bpf.message(), HasSubstr("setcap"));
  absl::Status no_perfmon = CheckProfilingCapabilities(CapabilitySet(Bit(kCapBpf)));
  EXPECT_THAT(no_perfmon.message(), HasSubstr("missing capability CAP_PERFMON"));
  EXPECT_FALSE(CheckProfilingCapabilities(CapabilitySet(0)).ok());
}

}  // namespace
}  // namespace pystrobe

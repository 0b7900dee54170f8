#include "daemon/loader/libbpf_errors.h"

#include <cerrno>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;

TEST(LibbpfErrorTest, NegativeErrnoBecomesStatusWithContext) {
  absl::Status status = LibbpfError(-EPERM, "attach perf_event on cpu 3");
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(status.message(), "attach perf_event on cpu 3: Operation not permitted");
  EXPECT_EQ(LibbpfError(-ENOENT, "x").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LibbpfError(-EINVAL, "x").code(), absl::StatusCode::kInvalidArgument);
}

TEST(LibbpfLogTest, VerifierReasonIsTheLineBeforeTheInstructionCount) {
  const char* log =
      "libbpf: prog 'sample_cpu': BPF program load failed: Permission denied\n"
      "libbpf: prog 'sample_cpu': -- BEGIN PROG LOAD LOG --\n"
      "0: R1=ctx(off=0,imm=0) R10=fp0\n"
      "; int sample_cpu(struct bpf_perf_event_data *ctx)\n"
      "12: (79) r1 = *(u64 *)(r0 +0)\n"
      "R0 invalid mem access 'map_value_or_null'\n"
      "processed 14 insns (limit 1000000) max_states_per_insn 0\n"
      "-- END PROG LOAD LOG --\n";
  EXPECT_EQ(LibbpfLog::VerifierReason(log), "R0 invalid mem access 'map_value_or_null'");
}

TEST(LibbpfLogTest, WithoutAVerifierLogTheLastLibbpfLineExplains) {
  EXPECT_THAT(LibbpfLog::VerifierReason("libbpf: failed to find BTF for extern 'x'\n"),
              HasSubstr("failed to find BTF"));
  EXPECT_EQ(LibbpfLog::VerifierReason(""), "");
}

}  // namespace
}  // namespace pystrobe

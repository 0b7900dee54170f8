// The kernel's native walk with unwind tables (bpf/native_unwind.bpf.h), run
// for real: this thread faults at a known instruction with its stack pointer
// and frame pointer on a stack the test wrote, and the tables and mappings,
// handed over through UnwindMaps as the daemon does, say how each frame
// finds its caller. The frames of every walk are known in advance.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "bpf/pystrobe_abi.h"
#include "daemon/loader/unwind_maps.h"
#include "daemon/unwind/unwind_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/bpf/bpf_test_support.h"

// void pystrobe_bpf_test_fault_on_stack(uint8_t* page, uint64_t sp, uint64_t bp):
// writes to `page` (one fault, at pystrobe_bpf_test_fault_ip) with rsp = sp
// and rbp = bp, then puts both back. Nothing else touches the crafted stack.
// pystrobe_bpf_test_fault_on_stack_b does the same, faulting at
// pystrobe_bpf_test_fault_ip_b, in the same page (both in one aligned 128 bytes).
asm(R"(
  .pushsection .text
  .p2align 7
  .globl pystrobe_bpf_test_fault_on_stack
  .hidden pystrobe_bpf_test_fault_on_stack
  .type pystrobe_bpf_test_fault_on_stack, @function
pystrobe_bpf_test_fault_on_stack:
  push %rbp
  push %rbx
  mov %rsp, %rbx
  mov %rsi, %rsp
  mov %rdx, %rbp
  .globl pystrobe_bpf_test_fault_ip
  .hidden pystrobe_bpf_test_fault_ip
pystrobe_bpf_test_fault_ip:
  movb $1, (%rdi)
  mov %rbx, %rsp
  pop %rbx
  pop %rbp
  ret
  .size pystrobe_bpf_test_fault_on_stack, .-pystrobe_bpf_test_fault_on_stack
  .globl pystrobe_bpf_test_fault_on_stack_b
  .hidden pystrobe_bpf_test_fault_on_stack_b
  .type pystrobe_bpf_test_fault_on_stack_b, @function
pystrobe_bpf_test_fault_on_stack_b:
  push %rbp
  push %rbx
  mov %rsp, %rbx
  mov %rsi, %rsp
  mov %rdx, %rbp
  .globl pystrobe_bpf_test_fault_ip_b
  .hidden pystrobe_bpf_test_fault_ip_b
pystrobe_bpf_test_fault_ip_b:
  movb $1, (%rdi)
  mov %rbx, %rsp
  pop %rbx
  pop %rbp
  ret
  .size pystrobe_bpf_test_fault_on_stack_b, .-pystrobe_bpf_test_fault_on_stack_b
  .popsection
)");
extern "C" void pystrobe_bpf_test_fault_on_stack(uint8_t* page, uint64_t sp, uint64_t bp);
extern "C" void pystrobe_bpf_test_fault_on_stack_b(uint8_t* page, uint64_t sp, uint64_t bp);
extern "C" const char pystrobe_bpf_test_fault_ip[];
extern "C" const char pystrobe_bpf_test_fault_ip_b[];

namespace pystrobe::bpf_test {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

constexpr uint32_t kFaultTable = 1;
constexpr uint32_t kLibraryTable = 2;
// A library that is nowhere mapped: the walk reads no code, only the stack,
// so its return addresses need only lie in a mapping the kernel was given.
constexpr uint64_t kLibraryStart = 0x200000;
constexpr uint64_t kLibraryEnd = 0x205000;
constexpr uint64_t kLibraryLinkBase = 0x10000;
// Return addresses into its five pages, whose rules are (see SetUp):
constexpr uint64_t kInRbpFrame = kLibraryStart + 0x0010;    // CFA = rbp + 16
constexpr uint64_t kInRspFrame = kLibraryStart + 0x1010;    // CFA = rsp + 8
constexpr uint64_t kInOutermost = kLibraryStart + 0x2010;   // the stack's end
constexpr uint64_t kInLargeFrame = kLibraryStart + 0x3010;  // CFA = rsp + kLargeFrame
constexpr uint64_t kInGap = kLibraryStart + 0x4010;         // no rule
// Larger than the walk's copy of the stack at once, a page
// (UNWIND_STACK_WINDOW): its return address lies in another page than its rsp.
constexpr int32_t kLargeFrame = 7000;

pystrobe_unwind_row Row(uint32_t addr, uint8_t cfa_rule, int32_t cfa_offset,
                        uint8_t rbp_rule = PYSTROBE_UNWIND_RBP_SAME, int16_t rbp_offset = 0) {
  return {.addr = addr,
          .cfa_offset = cfa_offset,
          .rbp_offset = rbp_offset,
          .cfa_rule = cfa_rule,
          .rbp_rule = rbp_rule};
}

UnwindTable TableOf(std::vector<pystrobe_unwind_row> rows) {
  UnwindTable table;
  table.rows = std::move(rows);
  IndexUnwindTablePages(table);
  return table;
}

class NativeUnwindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SamplerConfig config;
    config.native_unwind_bytes = uint64_t{1} << 20;
    // Whole native stacks for CPython processes too (record --native).
    config.python_native_stacks = true;
    StartSamplerOrSkip(config, &sampler_);
    if (sampler_ == nullptr) return;
    maps_ = std::make_unique<UnwindMaps>(sampler_->sampler().unwind_maps());

    // The faulting instruction's page, as if linked at 0x1000: it pushed
    // rbp after its return address (CFA = rsp + 16, rbp saved at CFA - 16).
    // From the second faulting instruction on, the frame is its return
    // address alone (CFA = rsp + 8).
    const uint64_t fault_page = fault_ip() & ~uint64_t{0xfff};
    ASSERT_EQ(fault_ip_b() & ~uint64_t{0xfff}, fault_page);
    const auto fault_b_link = static_cast<uint32_t>(0x1000 + (fault_ip_b() - fault_page));
    ASSERT_TRUE(maps_
                    ->LoadTable(kFaultTable, TableOf({Row(0x1000, PYSTROBE_UNWIND_CFA_RSP, 16,
                                                          PYSTROBE_UNWIND_RBP_OFFSET, -16),
                                                      Row(fault_b_link, PYSTROBE_UNWIND_CFA_RSP, 8),
                                                      Row(0x2000, PYSTROBE_UNWIND_CFA_INVALID, 0)}))
                    .ok());
    ASSERT_TRUE(
        maps_
            ->LoadTable(
                kLibraryTable,
                TableOf({Row(kLibraryLinkBase, PYSTROBE_UNWIND_CFA_RBP, 16,
                             PYSTROBE_UNWIND_RBP_OFFSET, -16),
                         Row(kLibraryLinkBase + 0x1000, PYSTROBE_UNWIND_CFA_RSP, 8),
                         Row(kLibraryLinkBase + 0x2000, PYSTROBE_UNWIND_CFA_END, 0),
                         Row(kLibraryLinkBase + 0x3000, PYSTROBE_UNWIND_CFA_RSP, kLargeFrame),
                         Row(kLibraryLinkBase + 0x4000, PYSTROBE_UNWIND_CFA_INVALID, 0)}))
            .ok());
    const pystrobe_unwind_mapping mappings[] = {
        {.start = kLibraryStart,
         .end = kLibraryEnd,
         .bias = kLibraryStart - kLibraryLinkBase,
         .table_id = kLibraryTable,
         ._pad = 0},
        {.start = fault_page,
         .end = fault_page + 0x1000,
         .bias = fault_page - 0x1000,
         .table_id = kFaultTable,
         ._pad = 0},
    };
    ASSERT_TRUE(maps_->SetProcessMappings(static_cast<uint32_t>(getpid()), mappings).ok());
    stack_ = memory_.Allocate(64 * 1024, TargetMemory::kPageSize) + 32 * 1024;
  }

  static uint64_t fault_ip() { return reinterpret_cast<uint64_t>(pystrobe_bpf_test_fault_ip); }
  static uint64_t fault_ip_b() { return reinterpret_cast<uint64_t>(pystrobe_bpf_test_fault_ip_b); }

  // Faults with rsp = stack_ and rbp = `bp`, and returns the sample taken
  // at the fault (a CPython thread's first samples come with copies of code
  // objects). Beside stress-ng one fault once gave two samples (the page-fault
  // event fires each time the instruction faults; why it faulted twice was
  // not seen): a sample at the fault walks the same stack, so every one of
  // them must be the same walk.
  // `at_b`: the fault is at fault_ip_b instead.
  SampleRecord SampleOnCraftedStack(uint64_t bp, bool at_b = false) {
    const uint64_t ip = at_b ? fault_ip_b() : fault_ip();
    absl::StatusOr<std::vector<RingRecord>> records =
        sampler_->SampleFault([this, bp, at_b](uint8_t* page) {
          (at_b ? pystrobe_bpf_test_fault_on_stack_b : pystrobe_bpf_test_fault_on_stack)(
              page, stack_, bp);
        });
    EXPECT_TRUE(records.ok()) << records.status();
    std::vector<SampleRecord> at_fault;
    if (records.ok()) {
      for (RingRecord& record : *records) {
        auto* sample = std::get_if<SampleRecord>(&record);
        if (sample != nullptr && !sample->user_ips.empty() && sample->user_ips[0] == ip)
          at_fault.push_back(std::move(*sample));
      }
    }
    if (at_fault.empty()) {
      ADD_FAILURE() << "no sample at the fault among " << (records.ok() ? records->size() : 0)
                    << " records";
      return {};
    }
    for (const SampleRecord& again : at_fault) {
      EXPECT_EQ(again.user_ips, at_fault[0].user_ips) << "the same fault walked twice differs";
    }
    return std::move(at_fault[0]);
  }

  // The faulting frame's return address and saved rbp, then a frame found
  // through rbp that returns to `rbp_frame_return`, then a frame found
  // through rsp that returns to `last_return`.
  uint64_t WriteStack(uint64_t rbp_frame_return, uint64_t last_return) {
    const uint64_t saved_rbp = stack_ + 64;
    memory_.WriteU64(stack_, saved_rbp);
    memory_.WriteU64(stack_ + 8, rbp_frame_return);
    memory_.WriteU64(saved_rbp, 0x5a5a);  // the rbp of the frames further out
    memory_.WriteU64(saved_rbp + 8, kInRspFrame);
    memory_.WriteU64(saved_rbp + 16, last_return);
    return 0x1234;  // rbp at the fault: the faulting frame's rule reads it off the stack
  }

  // A stack whose faulting frame returns to returns[0], each frame to the
  // next return address, laid out by each one's rule (kInRbpFrame: rbp
  // saved where rbp points, kInRspFrame: its return address alone,
  // kInLargeFrame: kLargeFrame bytes), the last being kInOutermost.
  // Returns the frames the walk must find.
  std::vector<uint64_t> WriteChain(const std::vector<uint64_t>& returns) {
    std::vector<uint64_t> expected = {fault_ip()};
    std::vector<uint64_t> rbp_saved_at = {stack_};  // the faulting frame's, then each rbp frame's
    std::vector<uint64_t> rbp_frames;
    uint64_t sp = stack_ + 16;
    memory_.WriteU64(stack_ + 8, returns[0]);
    for (size_t i = 0; i + 1 < returns.size(); i++) {
      expected.push_back(returns[i]);
      uint64_t return_at = sp;
      if (returns[i] == kInRbpFrame) {
        rbp_frames.push_back(sp);
        rbp_saved_at.push_back(sp);
        return_at = sp + 8;
        sp += 16;
      } else if (returns[i] == kInLargeFrame) {
        return_at = sp + kLargeFrame - 8;
        sp += kLargeFrame;
      } else {
        sp += 8;
      }
      memory_.WriteU64(return_at, returns[i + 1]);
    }
    expected.push_back(returns.back());
    // Each saved rbp is the next rbp frame's rsp.
    for (size_t k = 0; k < rbp_saved_at.size(); k++)
      memory_.WriteU64(rbp_saved_at[k], k < rbp_frames.size() ? rbp_frames[k] : 0x5a5a);
    return expected;
  }

  TargetMemory memory_;
  std::unique_ptr<ThreadSampler> sampler_;
  std::unique_ptr<UnwindMaps> maps_;
  uint64_t stack_ = 0;
};

TEST_F(NativeUnwindTest, StackIsWalkedThroughRspAndRbpRulesToTheOutermostFrame) {
  SampleRecord sample = SampleOnCraftedStack(WriteStack(kInRbpFrame, kInOutermost));
  EXPECT_TRUE(sample.kernel_ips.empty());
  EXPECT_THAT(sample.user_ips, ElementsAre(fault_ip(), kInRbpFrame, kInRspFrame, kInOutermost));
  EXPECT_EQ(sample.flags, 0u);
  SamplerCounters counters = sampler_->counters();
  EXPECT_EQ(counters.native_complete, 1u);
  EXPECT_EQ(counters.dropped[PYSTROBE_DROP_NATIVE_UNWIND], 0u);
}

TEST_F(NativeUnwindTest, RecursionThroughTheSamePcsTakesEachFramesOwnRegisters) {
  // Thirty times an rbp-based frame then an rsp-based one, as a recursion
  // through the same two return addresses: from the third frame on the
  // walk finds their rules in its cache, and each rule must still be
  // applied to that frame's own rsp and rbp.
  constexpr int kRecursions = 30;
  std::vector<uint64_t> returns;
  for (int i = 0; i < kRecursions; i++) {
    returns.push_back(kInRbpFrame);
    returns.push_back(kInRspFrame);
  }
  returns.push_back(kInOutermost);
  std::vector<uint64_t> expected = WriteChain(returns);

  SampleRecord sample = SampleOnCraftedStack(0x1234);
  EXPECT_THAT(sample.user_ips, ElementsAreArray(expected));
  EXPECT_EQ(sample.flags, 0u);
  SamplerCounters counters = sampler_->counters();
  EXPECT_EQ(counters.native_complete, 1u);
  EXPECT_EQ(counters.dropped[PYSTROBE_DROP_NATIVE_UNWIND], 0u);
}

TEST_F(NativeUnwindTest, ACallerRememberedFromAnEarlierWalkIsCheckedNotTrusted) {
  // The walk remembers, in a return address's cache slot, where it found the
  // caller's return address last (native_fast_frames). The rbp frame's
  // caller is the rsp frame, then the large frame, whose rule differs, then
  // the rsp frame again: each walk must follow the stack it reads.
  const std::vector<uint64_t> via_rsp = {kInRspFrame, kInRbpFrame, kInRspFrame,
                                         kInRbpFrame, kInRspFrame, kInOutermost};
  const std::vector<uint64_t> via_large = {kInRspFrame, kInRbpFrame, kInLargeFrame, kInRspFrame,
                                           kInOutermost};
  for (const auto* returns : {&via_rsp, &via_rsp, &via_large, &via_rsp, &via_large}) {
    std::vector<uint64_t> expected = WriteChain(*returns);
    SampleRecord sample = SampleOnCraftedStack(0x1234);
    EXPECT_THAT(sample.user_ips, ElementsAreArray(expected));
  }
  EXPECT_EQ(sampler_->counters().native_complete, 5u);
}

TEST_F(NativeUnwindTest, FramesLargerThanTheStackWindowAndStacksLongerThanItAreWalkedWhole) {
  // A frame whose return address lies further above its rsp than the walk
  // copies of the stack at once, then 200 frames of 8 bytes, across the
  // next page boundary: each return address comes from the right place.
  constexpr int kSmallFrames = 200;
  std::vector<uint64_t> expected = {fault_ip(), kInLargeFrame};
  uint64_t sp = stack_;
  memory_.WriteU64(sp, 0x5a5a);  // the faulting frame's saved rbp
  memory_.WriteU64(sp + 8, kInLargeFrame);
  sp += 16;
  memory_.WriteU64(sp + kLargeFrame - 8, kInRspFrame);
  sp += kLargeFrame;
  for (int i = 0; i < kSmallFrames; i++) {
    expected.push_back(kInRspFrame);
    memory_.WriteU64(sp, i + 1 < kSmallFrames ? kInRspFrame : kInOutermost);
    sp += 8;
  }
  expected.push_back(kInOutermost);

  SampleRecord sample = SampleOnCraftedStack(0x1234);
  EXPECT_THAT(sample.user_ips, ElementsAreArray(expected));
  EXPECT_EQ(sample.flags, 0u);
  EXPECT_EQ(sampler_->counters().native_complete, 1u);
}

TEST_F(NativeUnwindTest, ReturnAddressAtAFunctionsEndTakesTheCallersRule) {
  // A call that ends a function returns to the first byte of the next one:
  // the rule is the one of the call, a byte earlier (rbp-based here), not
  // the one that starts at the return address (rsp-based).
  constexpr uint64_t kAfterLastCall = kLibraryStart + 0x1000;
  SampleRecord sample = SampleOnCraftedStack(WriteStack(kAfterLastCall, kInOutermost));
  EXPECT_THAT(sample.user_ips, ElementsAre(fault_ip(), kAfterLastCall, kInRspFrame, kInOutermost));
  EXPECT_EQ(sampler_->counters().native_complete, 1u);
}

TEST_F(NativeUnwindTest, InterruptedPcsOfOnePageTakeTheirOwnRowsRules) {
  // The walk caches an interrupted pc's rule for the pcs its row holds for:
  // a tick at the second faulting instruction, in the same page but under
  // the next row, must not take the first one's rule (its rsp + 16 would
  // read the second frame's return address as the first's).
  SampleRecord first = SampleOnCraftedStack(WriteStack(kInRbpFrame, kInOutermost));
  EXPECT_THAT(first.user_ips, ElementsAre(fault_ip(), kInRbpFrame, kInRspFrame, kInOutermost));

  memory_.WriteU64(stack_, kInRspFrame);
  memory_.WriteU64(stack_ + 8, kInOutermost);
  SampleRecord second = SampleOnCraftedStack(0x1234, /*at_b=*/true);
  EXPECT_THAT(second.user_ips, ElementsAre(fault_ip_b(), kInRspFrame, kInOutermost));

  SampleRecord again = SampleOnCraftedStack(WriteStack(kInRbpFrame, kInOutermost));
  EXPECT_THAT(again.user_ips, ElementsAre(fault_ip(), kInRbpFrame, kInRspFrame, kInOutermost));
  EXPECT_EQ(sampler_->counters().native_complete, 3u);
}

TEST_F(NativeUnwindTest, InterruptedPcsUnderTwoRowsOfOnePageAreBothKeptCached) {
  // Ticks that alternate between two rows of one page (a page of small
  // functions: their pushes, bodies and pops) find both rules in the walk's
  // cache, each CPU's own: with the fault table unloaded after the first two
  // walks, the next two still walk whole, where a lookup would find the
  // table absent and end the stack asking for it.
  PinnedToThisCpu pinned;
  auto walk_at = [&](bool at_b) {
    if (at_b) {
      memory_.WriteU64(stack_, kInRspFrame);
      memory_.WriteU64(stack_ + 8, kInOutermost);
      return SampleOnCraftedStack(0x1234, /*at_b=*/true);
    }
    return SampleOnCraftedStack(WriteStack(kInRbpFrame, kInOutermost));
  };
  ASSERT_THAT(walk_at(false).user_ips,
              ElementsAre(fault_ip(), kInRbpFrame, kInRspFrame, kInOutermost));
  ASSERT_THAT(walk_at(true).user_ips, ElementsAre(fault_ip_b(), kInRspFrame, kInOutermost));
  maps_->UnloadTable(kFaultTable);
  SampleRecord first = walk_at(false);
  EXPECT_THAT(first.user_ips, ElementsAre(fault_ip(), kInRbpFrame, kInRspFrame, kInOutermost));
  EXPECT_EQ(first.flags, 0u);
  SampleRecord second = walk_at(true);
  EXPECT_THAT(second.user_ips, ElementsAre(fault_ip_b(), kInRspFrame, kInOutermost));
  EXPECT_EQ(second.flags, 0u);
  EXPECT_EQ(sampler_->counters().dropped[PYSTROBE_DROP_NATIVE_TABLE_ABSENT], 0u);
}

TEST_F(NativeUnwindTest, ZeroReturnAddressEndsTheStackComplete) {
  SampleRecord sample = SampleOnCraftedStack(WriteStack(kInRbpFrame, 0));
  EXPECT_THAT(sample.user_ips, ElementsAre(fault_ip(), kInRbpFrame, kInRspFrame));
  EXPECT_EQ(sampler_->counters().native_complete, 1u);
}

TEST_F(NativeUnwindTest, PcWithoutARuleEndsTheStackWithOneUnknownFrame) {
  SampleRecord sample = SampleOnCraftedStack(WriteStack(kInRbpFrame, kInGap));
  EXPECT_THAT(sample.user_ips, ElementsAre(fault_ip(), kInRbpFrame, kInRspFrame, kInGap,
                                           PYSTROBE_UNWIND_FRAME_UNKNOWN));
  EXPECT_EQ(sample.flags, 0u);
  SamplerCounters counters = sampler_->counters();
  EXPECT_EQ(counters.native_complete, 0u);
  EXPECT_EQ(counters.dropped[PYSTROBE_DROP_NATIVE_UNWIND], 1u);
  EXPECT_EQ(counters.dropped[PYSTROBE_DROP_NATIVE_STALE_MAPPINGS], 0u);
}

TEST_F(NativeUnwindTest, PcOutsideEveryMappingIsFlaggedStale) {
  constexpr uint64_t kUnmapped = 0x300010;
  SampleRecord sample = SampleOnCraftedStack(WriteStack(kInRbpFrame, kUnmapped));
  EXPECT_THAT(sample.user_ips, ElementsAre(fault_ip(), kInRbpFrame, kInRspFrame, kUnmapped,
                                           PYSTROBE_UNWIND_FRAME_UNKNOWN));
  EXPECT_EQ(sample.flags, PYSTROBE_SAMPLE_NATIVE_STALE);
  SamplerCounters counters = sampler_->counters();
  EXPECT_EQ(counters.dropped[PYSTROBE_DROP_NATIVE_STALE_MAPPINGS], 1u);
  EXPECT_EQ(counters.dropped[PYSTROBE_DROP_NATIVE_UNWIND], 1u);
}

TEST_F(NativeUnwindTest, WalksStampTheTablesTheyUseForEviction) {
  // Userspace evicts the table walked least lately (NativeUnwindTracker):
  // each walk stamps the tables of its frames, whether it looked their rules
  // up (the first walk) or found them in its cache (the second, where the
  // library's frames follow the faulting frame's in the fast loop). A table
  // no walk used stays at 0, as a table just loaded is.
  constexpr uint32_t kUnwalkedTable = 3;
  ASSERT_TRUE(
      maps_->LoadTable(kUnwalkedTable, TableOf({Row(0x1000, PYSTROBE_UNWIND_CFA_RSP, 8)})).ok());
  const uint64_t bp = WriteStack(kInRbpFrame, kInOutermost);
  for (int walk = 0; walk < 2; walk++) {
    SampleRecord sample = SampleOnCraftedStack(bp);
    EXPECT_THAT(sample.user_ips, ElementsAre(fault_ip(), kInRbpFrame, kInRspFrame, kInOutermost));
    EXPECT_EQ(maps_->LastUsedNs(kFaultTable), sample.time_ns) << "walk " << walk;
    EXPECT_EQ(maps_->LastUsedNs(kLibraryTable), sample.time_ns) << "walk " << walk;
    EXPECT_EQ(maps_->LastUsedNs(kUnwalkedTable), 0u) << "walk " << walk;
    // Past the stamps' grain (UNWIND_TABLE_USED_GRAIN_NS, 64 ms): the next
    // walk writes them again.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(
      maps_->LoadTable(kLibraryTable, TableOf({Row(kLibraryLinkBase, PYSTROBE_UNWIND_CFA_RSP, 8)}))
          .ok());
  EXPECT_EQ(maps_->LastUsedNs(kLibraryTable), 0u) << "a table loaded again is not walked yet";
}

TEST_F(NativeUnwindTest, RulesFoundBeforeTheProcessWasRemappedAreNotUsedAfter) {
  // The walk keeps the rules it found for the process's pcs from sample to
  // sample; once the library is unmapped, its pcs are stale however often
  // they were walked before.
  uint64_t bp = WriteStack(kInRbpFrame, kInOutermost);
  SampleRecord before = SampleOnCraftedStack(bp);
  EXPECT_THAT(before.user_ips, ElementsAre(fault_ip(), kInRbpFrame, kInRspFrame, kInOutermost));

  const uint64_t fault_page = fault_ip() & ~uint64_t{0xfff};
  const pystrobe_unwind_mapping without_library[] = {{.start = fault_page,
                                                      .end = fault_page + 0x1000,
                                                      .bias = fault_page - 0x1000,
                                                      .table_id = kFaultTable,
                                                      ._pad = 0}};
  ASSERT_TRUE(maps_->SetProcessMappings(static_cast<uint32_t>(getpid()), without_library).ok());
  SampleRecord after = SampleOnCraftedStack(bp);
  EXPECT_THAT(after.user_ips, ElementsAre(fault_ip(), kInRbpFrame, PYSTROBE_UNWIND_FRAME_UNKNOWN));
  EXPECT_EQ(after.flags, PYSTROBE_SAMPLE_NATIVE_STALE);
}

TEST_F(NativeUnwindTest, FramePointerBelowTheStackPointerEndsTheStackUnknown) {
  // The rbp frame's saved rbp points below its own frame: garbage, not a caller.
  WriteStack(kInRbpFrame, kInOutermost);
  memory_.WriteU64(stack_, stack_ - 64);
  SampleRecord sample = SampleOnCraftedStack(0x1234);
  EXPECT_THAT(sample.user_ips, ElementsAre(fault_ip(), kInRbpFrame, PYSTROBE_UNWIND_FRAME_UNKNOWN));
  EXPECT_EQ(sampler_->counters().dropped[PYSTROBE_DROP_NATIVE_UNWIND], 1u);
}

TEST_F(NativeUnwindTest, PythonFramesOfACPythonThreadFollowItsWholeNativeStack) {
  absl::StatusOr<PythonLayout> layout = PythonLayoutForVersion({3, 12, -1});
  ASSERT_TRUE(layout.ok()) << layout.status();
  FakeCPython python(*layout, memory_);
  uint64_t tstate = python.AddThreadState(ThisThreadId());
  uint64_t code = python.AddCode(0x100000, 0x200000, 3);
  uint64_t frame = memory_.Allocate(256);
  python.WriteInterpreterFrame(frame, code, 6, 0);
  python.SetTopFrame(tstate, frame);
  ASSERT_TRUE(sampler_->SetPythonProcess(python.process()).ok());

  SampleRecord sample = SampleOnCraftedStack(WriteStack(kInRbpFrame, kInOutermost));
  EXPECT_THAT(sample.user_ips, ElementsAre(fault_ip(), kInRbpFrame, kInRspFrame, kInOutermost));
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_THAT(sample.python_frames,
              ElementsAre(PythonFrameRecord{code, python.StampOf(code), 6, false}));
}

}  // namespace
}  // namespace pystrobe::bpf_test

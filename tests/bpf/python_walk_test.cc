// The kernel's CPython walk (bpf/python_stack.bpf.c), run for real: the
// sampler object the binary loads samples this test's own thread while a
// fake interpreter, laid out with pystrobe's tables for each version, says
// the thread is running frames the test built. Every record is known in
// advance, field by field: no floors, no luck.
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bpf/pystrobe_abi.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/bpf/bpf_test_support.h"

namespace pystrobe {

std::ostream& operator<<(std::ostream& out, const PythonFrameRecord& frame) {
  return out << "{code 0x" << std::hex << frame.code << ", stamp 0x" << frame.stamp << std::dec
             << ", offset " << frame.instr_offset << (frame.eval_entry ? ", entry}" : "}");
}

namespace bpf_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// The walk's depth (--max-python-depth) for every test here.
constexpr int kMaxFrames = 16;
// The owner of a generator's or coroutine's frame (FRAME_OWNED_BY_GENERATOR).
constexpr uint8_t kOwnedByGenerator = 1;

PythonLayout Layout(int major, int minor) {
  absl::StatusOr<PythonLayout> layout = PythonLayoutForVersion({major, minor, -1});
  if (!layout.ok()) std::abort();
  return *layout;
}

class PythonWalkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SamplerConfig config;
    config.python_max_frames = kMaxFrames;
    StartSamplerOrSkip(config, &sampler_);
  }

  // A fake interpreter of `major`.`minor` for this process, handed to the
  // kernel, with a thread state for this thread.
  FakeCPython& Interpreter(int major, int minor) {
    python_ = std::make_unique<FakeCPython>(Layout(major, minor), memory_);
    tstate_ = python_->AddThreadState(ThisThreadId());
    absl::Status handed = sampler_->SetPythonProcess(python_->process());
    EXPECT_TRUE(handed.ok()) << handed;
    return *python_;
  }

  // Takes one sample of this thread and returns its SAMPLE record.
  SampleRecord SampleOnce() {
    absl::StatusOr<std::vector<SampleRecord>> samples = sampler_->SampleStacks(1);
    EXPECT_TRUE(samples.ok()) << samples.status();
    if (!samples.ok() || samples->size() != 1) {
      ADD_FAILURE() << "one fault gave " << (samples.ok() ? samples->size() : 0) << " samples";
      return {};
    }
    return std::move((*samples)[0]);
  }

  // The frame the walk must record for `code` at `offset`.
  PythonFrameRecord Frame(uint64_t code, int32_t offset, bool entry) const {
    return {
        .code = code, .stamp = python_->StampOf(code), .instr_offset = offset, .eval_entry = entry};
  }

  // Code objects that differ in what their stamps mix (file, name, line).
  uint64_t NewCode(int n) {
    return python_->AddCode(0x100000 + 0x100 * n, 0x200000 + 0x100 * n, 10 * n + 1);
  }

  TargetMemory memory_;
  std::unique_ptr<ThreadSampler> sampler_;
  std::unique_ptr<FakeCPython> python_;
  uint64_t tstate_ = 0;
};

TEST_F(PythonWalkTest, Python38HeapFramesAreWalkedThroughFBackEachAnEvalEntry) {
  FakeCPython& python = Interpreter(3, 8);
  uint64_t outer = NewCode(1), middle = NewCode(2), inner = NewCode(3);
  uint64_t f1 = python.AddHeapFrame(outer, 0, 0);
  uint64_t f2 = python.AddHeapFrame(middle, 10, f1);
  uint64_t f3 = python.AddHeapFrame(inner, -1, f2);  // called, no instruction run yet
  python.SetTopFrame(tstate_, f3);

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.kind, PYSTROBE_EVENT_SAMPLE);
  EXPECT_EQ(sample.pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(sample.tid, static_cast<uint32_t>(syscall(SYS_gettid)));
  char comm[16] = {};
  prctl(PR_GET_NAME, comm);
  EXPECT_EQ(sample.comm, comm);
  // A fault in user mode: no kernel stack, and without --native a CPython
  // thread's native stack is its leaf alone.
  EXPECT_THAT(sample.kernel_ips, IsEmpty());
  EXPECT_EQ(sample.user_ips.size(), 1u);
  EXPECT_EQ(sample.flags, 0u);
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  // Before 3.11 each frame runs in its own eval loop call.
  EXPECT_THAT(sample.python_frames,
              ElementsAre(Frame(inner, -1, true), Frame(middle, 10, true), Frame(outer, 0, true)));
  SamplerCounters counters = sampler_->counters();
  EXPECT_EQ(counters.sent, 1u);
  EXPECT_EQ(counters.python_walked, 1u);
  EXPECT_EQ(counters.python_truncated, 0u);
  EXPECT_EQ(counters.dropped[PYSTROBE_DROP_PYTHON_READ], 0u);
}

TEST_F(PythonWalkTest, Python310LastInstructionInCodeUnitsIsReportedInBytes) {
  FakeCPython& python = Interpreter(3, 10);
  uint64_t outer = NewCode(1), inner = NewCode(2);
  uint64_t f1 = python.AddHeapFrame(outer, 46, 0);
  python.SetTopFrame(tstate_, python.AddHeapFrame(inner, 8, f1));

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_THAT(sample.python_frames, ElementsAre(Frame(inner, 8, true), Frame(outer, 46, true)));
}

// Frame objects made by calls in a row sit packed, each below its callee,
// and are read in one block with the rest of their page; one made elsewhere
// (its function first called long before) is read alone. Both are walked
// alike.
TEST_F(PythonWalkTest, Python310PackedFramesAndAFrameElsewhereAreWalkedAlike) {
  FakeCPython& python = Interpreter(3, 10);
  uint64_t main = NewCode(1), run = NewCode(2), step = NewCode(3), leaf = NewCode(4);
  uint64_t f1 = python.AddHeapFrame(main, 2, 0);
  memory_.AllocatePage();  // more than a page between f1 and the frames called from it
  uint64_t f2 = python.AddHeapFrame(run, 4, f1);
  uint64_t f3 = python.AddHeapFrame(step, 6, f2);
  python.SetTopFrame(tstate_, python.AddHeapFrame(leaf, 8, f3));

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_THAT(sample.python_frames, ElementsAre(Frame(leaf, 8, true), Frame(step, 6, true),
                                                Frame(run, 4, true), Frame(main, 2, true)));
  EXPECT_EQ(sampler_->counters().dropped[PYSTROBE_DROP_PYTHON_READ], 0u);
}

TEST_F(PythonWalkTest, Python311FramesSideBySideInChunksAreWalkedWithIsEntryMarkingEvalStarts) {
  FakeCPython& python = Interpreter(3, 11);
  const uint64_t stride = FakeCPython::kFrameStride;
  uint64_t codes[5];
  for (int i = 0; i < 5; ++i) codes[i] = NewCode(i + 1);
  // An older chunk holds the outermost frame; the newer chunk the other four,
  // side by side, each above the frame that called it.
  uint64_t old_chunk = memory_.AllocatePage(), chunk = memory_.AllocatePage();
  uint64_t f0 = old_chunk + 5 * stride;
  python.WriteInterpreterFrame(f0, codes[0], 4, 0, 0, /*is_entry=*/true);
  python.WriteInterpreterFrame(chunk, codes[1], 20, f0, 0, /*is_entry=*/true);
  python.WriteInterpreterFrame(chunk + stride, codes[2], 6, chunk);
  python.WriteInterpreterFrame(chunk + 2 * stride, codes[3], 0, chunk + stride, 0, true);
  // prev_instr one unit before the first instruction: not started.
  python.WriteInterpreterFrame(chunk + 3 * stride, codes[4], -2, chunk + 2 * stride);
  python.SetTopFrame(tstate_, chunk + 3 * stride);

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_EQ(sample.flags & PYSTROBE_SAMPLE_PY_TRUNCATED, 0u);
  EXPECT_THAT(
      sample.python_frames,
      ElementsAre(Frame(codes[4], -2, false), Frame(codes[3], 0, true), Frame(codes[2], 6, false),
                  Frame(codes[1], 20, true), Frame(codes[0], 4, true)));
}

TEST_F(PythonWalkTest, FramesAtTheStartOfAChunkAreReadWithoutThePageBelowIt) {
  FakeCPython& python = Interpreter(3, 12);
  // The chunk's first page follows one that cannot be read: a read that
  // reached below the frame's own page would fail the walk.
  uint64_t chunk = memory_.AllocatePageAboveUnreadable();
  uint64_t outer = NewCode(1), inner = NewCode(2);
  python.WriteShimFrame(chunk, 0);
  python.WriteInterpreterFrame(chunk + FakeCPython::kFrameStride, outer, 12, chunk);
  python.WriteInterpreterFrame(chunk + 2 * FakeCPython::kFrameStride, inner, 2,
                               chunk + FakeCPython::kFrameStride);
  python.SetTopFrame(tstate_, chunk + 2 * FakeCPython::kFrameStride);

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_THAT(sample.python_frames, ElementsAre(Frame(inner, 2, false), Frame(outer, 12, true)));
  EXPECT_EQ(sampler_->counters().dropped[PYSTROBE_DROP_PYTHON_READ], 0u);
}

TEST_F(PythonWalkTest, Python312ShimFrameIsSkippedAndMarksTheFrameAboveItAsAnEvalEntry) {
  FakeCPython& python = Interpreter(3, 12);
  const uint64_t stride = FakeCPython::kFrameStride;
  uint64_t chunk = memory_.AllocatePage();
  uint64_t main_code = NewCode(1), callback = NewCode(2), helper = NewCode(3);
  // main() -> [C call back into Python] -> callback() -> helper()
  python.WriteShimFrame(chunk, 0);
  python.WriteInterpreterFrame(chunk + stride, main_code, 30, chunk);
  python.WriteShimFrame(chunk + 2 * stride, chunk + stride);
  python.WriteInterpreterFrame(chunk + 3 * stride, callback, 14, chunk + 2 * stride);
  python.WriteInterpreterFrame(chunk + 4 * stride, helper, 8, chunk + 3 * stride);
  python.SetTopFrame(tstate_, chunk + 4 * stride);

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_THAT(sample.python_frames, ElementsAre(Frame(helper, 8, false), Frame(callback, 14, true),
                                                Frame(main_code, 30, true)));
}

TEST_F(PythonWalkTest, GeneratorFrameOnTheHeapIsWalkedIntoTheFrameThatResumedIt) {
  FakeCPython& python = Interpreter(3, 12);
  const uint64_t stride = FakeCPython::kFrameStride;
  uint64_t chunk = memory_.AllocatePage();
  uint64_t consumer = NewCode(1), generator = NewCode(2);
  python.WriteShimFrame(chunk, 0);
  python.WriteInterpreterFrame(chunk + stride, consumer, 40, chunk);
  // The generator's frame lives in its generator object, far from the chunk.
  uint64_t generator_frame = memory_.Allocate(256) + 64;
  python.WriteInterpreterFrame(generator_frame, generator, 16, chunk + stride, kOwnedByGenerator);
  python.SetTopFrame(tstate_, generator_frame);

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_THAT(sample.python_frames,
              ElementsAre(Frame(generator, 16, false), Frame(consumer, 40, true)));
}

TEST_F(PythonWalkTest, TornChainEndsAsReadFailedKeepingTheFramesBeforeTheBreak) {
  FakeCPython& python = Interpreter(3, 12);
  const uint64_t stride = FakeCPython::kFrameStride;
  uint64_t chunk = memory_.AllocatePage();
  uint64_t outer = NewCode(1), inner = NewCode(2);
  // The outermost frame's caller is in memory that cannot be read.
  python.WriteInterpreterFrame(chunk, outer, 2, memory_.unreadable());
  python.WriteInterpreterFrame(chunk + stride, inner, 4, chunk);
  python.SetTopFrame(tstate_, chunk + stride);

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_READ_FAILED);
  EXPECT_EQ(sample.flags & PYSTROBE_SAMPLE_PY_TRUNCATED, 0u);
  EXPECT_THAT(sample.python_frames, ElementsAre(Frame(inner, 4, false), Frame(outer, 2, false)));
  SamplerCounters counters = sampler_->counters();
  EXPECT_EQ(counters.dropped[PYSTROBE_DROP_PYTHON_READ], 1u);
  EXPECT_EQ(counters.python_walked, 0u);
  EXPECT_EQ(counters.sent, 1u);
}

TEST_F(PythonWalkTest, CodeObjectThatCannotBeReadEndsTheWalkAsReadFailed) {
  FakeCPython& python = Interpreter(3, 8);
  uint64_t outer = NewCode(1);
  uint64_t f1 = python.AddHeapFrame(outer, 0, 0);
  python.SetTopFrame(tstate_, python.AddHeapFrame(memory_.unreadable(), 6, f1));

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_READ_FAILED);
  EXPECT_THAT(sample.python_frames, IsEmpty());
  EXPECT_EQ(sampler_->counters().dropped[PYSTROBE_DROP_PYTHON_READ], 1u);
}

TEST_F(PythonWalkTest, CycleOfFramesIsCutAtTheDepthLimitAndFlaggedTruncated) {
  FakeCPython& python = Interpreter(3, 8);
  uint64_t ping = NewCode(1), pong = NewCode(2);
  uint64_t a = python.AddHeapFrame(ping, 2, 0);
  uint64_t b = python.AddHeapFrame(pong, 4, a);
  python.WriteHeapFrameBack(a, b);  // a <-> b: a chain with no end
  python.SetTopFrame(tstate_, a);

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_EQ(sample.flags & PYSTROBE_SAMPLE_PY_TRUNCATED, PYSTROBE_SAMPLE_PY_TRUNCATED);
  std::vector<PythonFrameRecord> expected;
  for (int i = 0; i < kMaxFrames; ++i) {
    expected.push_back(i % 2 == 0 ? Frame(ping, 2, true) : Frame(pong, 4, true));
  }
  EXPECT_EQ(sample.python_frames, expected);
  SamplerCounters counters = sampler_->counters();
  EXPECT_EQ(counters.python_truncated, 1u);
  EXPECT_EQ(counters.python_walked, 1u);
}

TEST_F(PythonWalkTest, StackExactlyAsDeepAsTheLimitIsWhole) {
  FakeCPython& python = Interpreter(3, 8);
  uint64_t recursive = NewCode(1);
  std::vector<PythonFrameRecord> expected;
  uint64_t frame = 0;
  for (int depth = 0; depth < kMaxFrames; ++depth) {
    frame = python.AddHeapFrame(recursive, 2 * depth, frame);
    expected.insert(expected.begin(), Frame(recursive, 2 * depth, true));
  }
  python.SetTopFrame(tstate_, frame);

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_EQ(sample.flags & PYSTROBE_SAMPLE_PY_TRUNCATED, 0u);
  EXPECT_EQ(sample.python_frames, expected);

  // One frame more and the outermost is cut, flagged.
  python.SetTopFrame(tstate_, python.AddHeapFrame(recursive, 99, frame));
  sample = SampleOnce();
  EXPECT_EQ(sample.flags & PYSTROBE_SAMPLE_PY_TRUNCATED, PYSTROBE_SAMPLE_PY_TRUNCATED);
  expected.pop_back();
  expected.insert(expected.begin(), Frame(recursive, 99, true));
  EXPECT_EQ(sample.python_frames, expected);
}

TEST_F(PythonWalkTest, Python313FrameWhoseExecutableIsNotCodeIsSkipped) {
  FakeCPython& python = Interpreter(3, 13);
  const uint64_t stride = FakeCPython::kFrameStride;
  uint64_t chunk = memory_.AllocatePage();
  uint64_t outer = NewCode(1), inner = NewCode(2);
  python.WriteShimFrame(chunk, 0);
  python.WriteInterpreterFrame(chunk + stride, outer, 10, chunk);
  // f_executable holds an object of another type (None, a function).
  python.WriteInterpreterFrame(chunk + 2 * stride, python.AddNonCodeObject(), 0, chunk + stride);
  python.WriteInterpreterFrame(chunk + 3 * stride, inner, 26, chunk + 2 * stride);
  python.SetTopFrame(tstate_, chunk + 3 * stride);

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_THAT(sample.python_frames, ElementsAre(Frame(inner, 26, false), Frame(outer, 10, true)));
  EXPECT_EQ(sampler_->counters().dropped[PYSTROBE_DROP_PYTHON_READ], 0u);
}

TEST_F(PythonWalkTest, ThreadWithoutAThreadStateIsReportedAndCounted) {
  python_ = std::make_unique<FakeCPython>(Layout(3, 11), memory_);
  // Two other threads of the interpreter; none is this one.
  uint64_t other = python_->AddThreadState(ThisThreadId() + 0x1000);
  python_->AddThreadState(ThisThreadId() - 0x1000);
  python_->SetGil(true, other);
  ASSERT_TRUE(sampler_->SetPythonProcess(python_->process()).ok());

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_NO_THREAD_STATE);
  EXPECT_THAT(sample.python_frames, IsEmpty());
  EXPECT_EQ(sample.flags, 0u);
  SamplerCounters counters = sampler_->counters();
  EXPECT_EQ(counters.dropped[PYSTROBE_DROP_PYTHON_NO_THREAD_STATE], 1u);
  EXPECT_EQ(counters.python_walked, 0u);
}

TEST_F(PythonWalkTest, ThreadStateIsFoundBehindOtherThreadsOfTheInterpreter) {
  python_ = std::make_unique<FakeCPython>(Layout(3, 9), memory_);
  tstate_ = python_->AddThreadState(ThisThreadId());
  for (int i = 1; i <= 3; ++i) python_->AddThreadState(ThisThreadId() + 0x1000 * i);
  ASSERT_TRUE(sampler_->SetPythonProcess(python_->process()).ok());
  uint64_t code = NewCode(1);
  python_->SetTopFrame(tstate_, python_->AddHeapFrame(code, 12, 0));

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_THAT(sample.python_frames, ElementsAre(Frame(code, 12, true)));
}

TEST_F(PythonWalkTest, ThreadStateRememberedFromAnEarlierSampleIsCheckedBeforeUse) {
  FakeCPython& python = Interpreter(3, 12);
  uint64_t first = NewCode(1), second = NewCode(2);
  uint64_t first_frame = memory_.Allocate(256), second_frame = memory_.Allocate(256);
  python.WriteInterpreterFrame(first_frame, first, 4, 0);
  python.WriteInterpreterFrame(second_frame, second, 8, 0);
  python.SetTopFrame(tstate_, first_frame);
  EXPECT_THAT(SampleOnce().python_frames, ElementsAre(Frame(first, 4, false)));

  // The thread state the kernel remembers for this thread now belongs to
  // another thread (freed and reused); this thread has a new one.
  memory_.WriteU64(tstate_ + python.offsets().tstate_thread_id, ThisThreadId() + 0x1000);
  uint64_t fresh = python.AddThreadState(ThisThreadId());
  python.SetTopFrame(fresh, second_frame);
  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_THAT(sample.python_frames, ElementsAre(Frame(second, 8, false)));
}

TEST_F(PythonWalkTest, GilFlagIsSetOnlyWhileLockedWithTheSampledThreadAsHolder) {
  for (int minor : {11, 12}) {  // the GIL inside _PyRuntime, then behind a pointer
    SCOPED_TRACE(absl::StrCat("3.", minor));
    FakeCPython& python = Interpreter(3, minor);
    uint64_t other = python.AddThreadState(ThisThreadId() + 0x1000);

    python.SetGil(/*locked=*/true, tstate_);
    EXPECT_EQ(SampleOnce().flags & PYSTROBE_SAMPLE_HOLDS_GIL, PYSTROBE_SAMPLE_HOLDS_GIL);
    // Released: last_holder still names the thread.
    python.SetGil(/*locked=*/false, tstate_);
    EXPECT_EQ(SampleOnce().flags & PYSTROBE_SAMPLE_HOLDS_GIL, 0u);
    python.SetGil(/*locked=*/true, other);
    EXPECT_EQ(SampleOnce().flags & PYSTROBE_SAMPLE_HOLDS_GIL, 0u);
  }
}

TEST_F(PythonWalkTest, ASampleSaysWhichInterpreterItsThreadStateBelongsTo) {
  FakeCPython& python = Interpreter(3, 12);
  const pystrobe_python_offsets& offsets = python.offsets();
  EXPECT_EQ(SampleOnce().interpreter_id, 0u);  // no interpreter pointer: the main one
  // The thread state of a sub-interpreter whose PyInterpreterState.id is 3.
  uint64_t subinterpreter = memory_.Allocate(offsets.interp_id + 8);
  memory_.WriteU64(subinterpreter + offsets.interp_id, 3);
  memory_.WriteU64(tstate_ + offsets.tstate_interp, subinterpreter);
  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_EQ(sample.interpreter_id, 3u);
}

// co_name as the kernel's copy of a code object holds it.
uint64_t CopiedName(const PythonCodeCopy& copy, const pystrobe_python_offsets& offsets) {
  uint64_t name = 0;
  absl::Status read = copy.memory.Read(copy.code + offsets.code_name, &name, sizeof(name));
  EXPECT_TRUE(read.ok()) << read;
  return name;
}

// The text of the compact ASCII str at `str` as the copy holds it; empty
// when the copy does not hold it whole.
std::string CopiedAscii(const PythonCodeCopy& copy, const pystrobe_python_offsets& offsets,
                        uint64_t str) {
  uint64_t length = 0;
  if (!copy.memory.Read(str + offsets.unicode_length, &length, sizeof(length)).ok() ||
      length > 4096) {
    return "";
  }
  std::string text(length, '\0');
  if (!copy.memory.Read(str + offsets.unicode_ascii_data, text.data(), length).ok()) return "";
  return text;
}

TEST_F(PythonWalkTest, CodeObjectReusedAtTheSameAddressIsStampedAnewAndCopiedAgain) {
  FakeCPython& python = Interpreter(3, 12);
  const uint64_t file = python.AddStr("app.py");
  const uint64_t first_name = python.AddStr("handle");
  const uint64_t second_name = python.AddStr("<lambda>");
  uint64_t code = python.AddCode(file, first_name, 7);
  uint64_t frame = memory_.Allocate(256);
  python.WriteInterpreterFrame(frame, code, 0, 0);
  python.SetTopFrame(tstate_, frame);
  const uint32_t first_stamp = python.StampOf(code);

  // The first sample that meets a code object sends its copy, before itself.
  auto records = sampler_->Sample(1);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 2u);
  ASSERT_TRUE(std::holds_alternative<PythonCodeCopy>((*records)[0]));
  const PythonCodeCopy& first_copy = std::get<PythonCodeCopy>((*records)[0]);
  EXPECT_EQ(first_copy.code, code);
  EXPECT_EQ(first_copy.stamp, first_stamp);
  EXPECT_EQ(CopiedName(first_copy, python.offsets()), first_name);
  EXPECT_EQ(CopiedAscii(first_copy, python.offsets(), first_name), "handle");
  EXPECT_EQ(CopiedAscii(first_copy, python.offsets(), file), "app.py");
  ASSERT_TRUE(std::holds_alternative<SampleRecord>((*records)[1]));
  EXPECT_THAT(std::get<SampleRecord>((*records)[1]).python_frames,
              ElementsAre(PythonFrameRecord{code, first_stamp, 0, false}));

  // Met again unchanged: no second copy.
  records = sampler_->Sample(1);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 1u);
  EXPECT_THAT(std::get<SampleRecord>((*records)[0]).python_frames,
              ElementsAre(PythonFrameRecord{code, first_stamp, 0, false}));

  // Freed, and another code object made at its address.
  python.RewriteCode(code, file, second_name, 8);
  const uint32_t second_stamp = python.StampOf(code);
  ASSERT_NE(second_stamp, first_stamp);
  records = sampler_->Sample(1);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 2u);
  ASSERT_TRUE(std::holds_alternative<PythonCodeCopy>((*records)[0]));
  const PythonCodeCopy& second_copy = std::get<PythonCodeCopy>((*records)[0]);
  EXPECT_EQ(second_copy.stamp, second_stamp);
  EXPECT_EQ(CopiedName(second_copy, python.offsets()), second_name);
  EXPECT_EQ(CopiedAscii(second_copy, python.offsets(), second_name), "<lambda>");
  EXPECT_THAT(std::get<SampleRecord>((*records)[1]).python_frames,
              ElementsAre(PythonFrameRecord{code, second_stamp, 0, false}));
  EXPECT_EQ(sampler_->counters().python_codes_sent, 2u);
}

TEST_F(PythonWalkTest, CodeObjectWhoseNameCannotBeReadIsCopiedWholeAtALaterSample) {
  // A copy is sent once: one sent without its name would name nothing once
  // the process is gone. A read fails while the process takes a
  // copy-on-write fault on the page (after a fork, on every page it writes).
  FakeCPython& python = Interpreter(3, 8);
  const uint64_t file = python.AddStr("exits.py");
  const uint64_t name_page = memory_.AllocatePage();
  const uint64_t name = python.AddStr("burn_unseen", name_page);
  const uint64_t code = python.AddCode(file, name, 35);
  python.SetTopFrame(tstate_, python.AddHeapFrame(code, 4, 0));
  const uint32_t stamp = python.StampOf(code);

  memory_.SetReadable(name_page, false);
  auto records = sampler_->Sample(1);
  memory_.SetReadable(name_page, true);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 1u) << "a copy without its name was sent";
  ASSERT_TRUE(std::holds_alternative<SampleRecord>((*records)[0]));
  EXPECT_THAT(std::get<SampleRecord>((*records)[0]).python_frames,
              ElementsAre(PythonFrameRecord{code, stamp, 4, true}));
  EXPECT_EQ(sampler_->counters().python_codes_sent, 0u);
  EXPECT_EQ(sampler_->counters().python_codes_deferred, 1u);

  records = sampler_->Sample(1);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 2u);
  ASSERT_TRUE(std::holds_alternative<PythonCodeCopy>((*records)[0]));
  const PythonCodeCopy& copy = std::get<PythonCodeCopy>((*records)[0]);
  EXPECT_EQ(copy.stamp, stamp);
  EXPECT_EQ(CopiedAscii(copy, python.offsets(), name), "burn_unseen");
  EXPECT_EQ(CopiedAscii(copy, python.offsets(), file), "exits.py");
  EXPECT_EQ(sampler_->counters().python_codes_sent, 1u);
}

TEST_F(PythonWalkTest, RecursiveFramesShareTheirCodeObjectsStamp) {
  FakeCPython& python = Interpreter(3, 11);
  const uint64_t stride = FakeCPython::kFrameStride;
  uint64_t chunk = memory_.AllocatePage();
  uint64_t recursive = NewCode(1), caller = NewCode(2);
  python.WriteInterpreterFrame(chunk, caller, 2, 0, 0, true);
  for (int i = 1; i <= 4; ++i) {
    python.WriteInterpreterFrame(chunk + i * stride, recursive, 10 * i, chunk + (i - 1) * stride);
  }
  python.SetTopFrame(tstate_, chunk + 4 * stride);

  SampleRecord sample = SampleOnce();
  EXPECT_THAT(sample.python_frames,
              ElementsAre(Frame(recursive, 40, false), Frame(recursive, 30, false),
                          Frame(recursive, 20, false), Frame(recursive, 10, false),
                          Frame(caller, 2, true)));
}

TEST_F(PythonWalkTest, ProcessNotKnownAsCPythonIsNotWalked) {
  // No entry in python_processes: native frames only.
  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_NOT_PYTHON);
  EXPECT_THAT(sample.python_frames, IsEmpty());
  SamplerCounters counters = sampler_->counters();
  EXPECT_EQ(counters.python_walked, 0u);
  EXPECT_EQ(counters.dropped[PYSTROBE_DROP_PYTHON_READ], 0u);
  EXPECT_EQ(counters.dropped[PYSTROBE_DROP_PYTHON_NO_THREAD_STATE], 0u);
}

TEST_F(PythonWalkTest, ProcessHandedOverAfterItsFirstSampleIsWalkedFromTheNext) {
  PinnedToThisCpu pinned;
  // Sampled before the daemon found its CPython: the CPU notes that it is
  // none, and must look again once the daemon hands it over.
  EXPECT_EQ(SampleOnce().python_status, PYSTROBE_PY_NOT_PYTHON);
  FakeCPython& python = Interpreter(3, 8);
  uint64_t code = NewCode(1);
  python.SetTopFrame(tstate_, python.AddHeapFrame(code, 6, 0));

  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_THAT(sample.python_frames, ElementsAre(Frame(code, 6, true)));
}

TEST_F(PythonWalkTest, ProcessHandedOverAgainIsWalkedByItsNewLayout) {
  PinnedToThisCpu pinned;
  FakeCPython& old_python = Interpreter(3, 8);
  uint64_t old_code = NewCode(1);
  old_python.SetTopFrame(tstate_, old_python.AddHeapFrame(old_code, 6, 0));
  EXPECT_THAT(SampleOnce().python_frames, ElementsAre(Frame(old_code, 6, true)));

  // The process execs another CPython, which the daemon hands over.
  FakeCPython& python = Interpreter(3, 11);
  uint64_t code = NewCode(2);
  uint64_t frame = memory_.AllocatePage() + FakeCPython::kFrameStride;
  python.WriteInterpreterFrame(frame, code, 8, 0, 0, /*is_entry=*/true);
  python.SetTopFrame(tstate_, frame);
  SampleRecord sample = SampleOnce();
  EXPECT_EQ(sample.python_status, PYSTROBE_PY_WALKED);
  EXPECT_THAT(sample.python_frames, ElementsAre(Frame(code, 8, true)));
}

TEST_F(PythonWalkTest, EachFaultIsExactlyOneSample) {
  FakeCPython& python = Interpreter(3, 8);
  uint64_t code = NewCode(1);
  python.SetTopFrame(tstate_, python.AddHeapFrame(code, 0, 0));
  absl::StatusOr<std::vector<SampleRecord>> samples = sampler_->SampleStacks(5);
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 5u);
  for (const SampleRecord& sample : *samples) {
    EXPECT_THAT(sample.python_frames, ElementsAre(Frame(code, 0, true)));
  }
  SamplerCounters counters = sampler_->counters();
  EXPECT_EQ(counters.taken, 5u);
  EXPECT_EQ(counters.sent, 5u);
  EXPECT_EQ(counters.filtered, 0u);
  EXPECT_EQ(counters.python_walked, 5u);
}

}  // namespace
}  // namespace bpf_test
}  // namespace pystrobe

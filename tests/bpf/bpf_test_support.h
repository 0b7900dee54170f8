// What the deterministic BPF tests share: the real sampler object loaded for
// this process alone, samples of the test's own thread taken one at a time,
// and fake CPython structures laid out in the test's own memory with the
// offsets of pystrobe's real per-version tables.
//
// A sample is taken by a page fault: the test thread's software page-fault
// event, with a sample period of 1, runs the cpu sampler program once per
// fault, and the thread faults exactly once on each fresh page it writes.
// The sampled thread is then stopped on memory the test built, so every
// field of the record is known in advance.
#ifndef PYSTROBE_TESTS_BPF_BPF_TEST_SUPPORT_H_
#define PYSTROBE_TESTS_BPF_BPF_TEST_SUPPORT_H_

#include <sched.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/loader/bpf_sampler.h"
#include "daemon/python/python_offsets.h"
#include "daemon/records/record_decoder.h"

namespace pystrobe::bpf_test {

// Memory of this process laid out by a test, as the target the BPF programs
// read: one mapping, written through before use (the kernel's reads of user
// memory cannot fault pages in), ending in a page no read can reach.
class TargetMemory {
 public:
  static constexpr size_t kPageSize = 4096;

  explicit TargetMemory(size_t bytes = size_t{4} << 20);
  ~TargetMemory();
  TargetMemory(const TargetMemory&) = delete;
  TargetMemory& operator=(const TargetMemory&) = delete;

  // `bytes` of zeroes aligned to `align`; aborts the test program when full.
  uint64_t Allocate(size_t bytes, size_t align = 16);
  // A whole page of zeroes: the start of a fresh data-stack chunk.
  uint64_t AllocatePage() { return Allocate(kPageSize, kPageSize); }
  // A page of zeroes that follows a page that cannot be read: a chunk whose
  // frames a read must not reach below.
  uint64_t AllocatePageAboveUnreadable();
  // An address in a page that cannot be read (PROT_NONE).
  uint64_t unreadable() const { return unreadable_; }
  // Makes the page at `page` (from AllocatePage) unreadable (PROT_NONE) or
  // readable again, as a page is for an instant while its process takes a
  // copy-on-write fault on it.
  void SetReadable(uint64_t page, bool readable);

  void WriteU64(uint64_t address, uint64_t value);
  void WriteU32(uint64_t address, uint32_t value);
  void WriteU8(uint64_t address, uint8_t value);

 private:
  uint8_t* base_;
  size_t size_;
  size_t used_ = 0;
  uint64_t unreadable_;
  std::vector<void*> guarded_pages_;  // AllocatePageAboveUnreadable's mappings
};

// One CPython interpreter's structures, as pystrobe's table for a version lays
// them out, in TargetMemory: _PyRuntime, one interpreter, its GIL, thread
// states, code objects and frames. Fields the walker does not read stay zero.
class FakeCPython {
 public:
  // Frames of a data-stack chunk (3.11+) lie this far apart.
  static constexpr uint64_t kFrameStride = 128;

  FakeCPython(const PythonLayout& layout, TargetMemory& memory);

  // The entry the daemon would hand the kernel for this interpreter.
  pystrobe_python_process process() const;
  const pystrobe_python_offsets& offsets() const { return offsets_; }

  // A thread state for the thread whose pthread_self() is `thread_id`,
  // put at the head of the interpreter's list, with no frames.
  uint64_t AddThreadState(uint64_t thread_id);
  // Makes `frame` (0: none) the innermost frame of `tstate`, as the
  // version's frame model reaches it (through a _PyCFrame on 3.11 and 3.12).
  void SetTopFrame(uint64_t tstate, uint64_t frame);
  // The GIL's state: whether it is locked, and its last holder.
  void SetGil(bool locked, uint64_t last_holder);

  // A code object of type PyCode_Type; `filename` and `name` are the
  // addresses its co_filename and co_name (and co_qualname, 3.11+) hold.
  uint64_t AddCode(uint64_t filename, uint64_t name, int32_t firstlineno);
  // A compact ASCII str holding `text`, at `address` when given (it must
  // have room), else allocated.
  uint64_t AddStr(std::string_view text, uint64_t address = 0);
  // Rewrites the code object at `code` as another one (freed and reused).
  void RewriteCode(uint64_t code, uint64_t filename, uint64_t name, int32_t firstlineno);
  // An object that is not a code object (3.13's f_executable may hold one).
  uint64_t AddNonCodeObject();
  // The stamp the walker must record for the code object at `code`.
  uint32_t StampOf(uint64_t code) const;

  // 3.8-3.10: a heap PyFrameObject running `code` at byte offset
  // `instr_offset`, called from `back` (0: the outermost).
  uint64_t AddHeapFrame(uint64_t code, int32_t instr_offset, uint64_t back);
  // Points heap frame `frame`'s f_back at `back`.
  void WriteHeapFrameBack(uint64_t frame, uint64_t back);
  // 3.11+: an _PyInterpreterFrame at `address` (in a chunk, or elsewhere for
  // a generator's frame) running `code` at byte offset `instr_offset`,
  // called from `previous`, with the owner byte `owner` and, on 3.11,
  // is_entry.
  void WriteInterpreterFrame(uint64_t address, uint64_t code, int32_t instr_offset,
                             uint64_t previous, uint8_t owner = 0, bool is_entry = false);
  // 3.12+: a C-stack shim frame at `address` (owner == frame_owner_cstack).
  void WriteShimFrame(uint64_t address, uint64_t previous);

 private:
  void WriteField(uint64_t object, uint32_t offset, uint64_t value);
  uint64_t ReadU64(uint64_t address) const;

  pystrobe_python_offsets offsets_;
  TargetMemory& memory_;
  uint64_t runtime_;
  uint64_t interp_;
  uint64_t gil_;
  uint64_t code_type_;
  uint64_t other_type_;
};

// The real sampler object, loaded for samples of this process only, its cpu
// sampler attached to this thread's page faults.
class ThreadSampler {
 public:
  // Opens, configures (a pid filter, with this process in it unless
  // `target_this_process` is false; `config`'s other knobs as given), loads
  // and attaches. FailedPrecondition when BPF cannot be used.
  static absl::StatusOr<std::unique_ptr<ThreadSampler>> Start(SamplerConfig config = {},
                                                              bool target_this_process = true);
  ~ThreadSampler();

  // Lets the kernel walk this process as the CPython `process` describes.
  absl::Status SetPythonProcess(const pystrobe_python_process& process);

  // Takes `count` samples of this thread, one per fresh page written, and
  // returns every record they produced, decoded, in the kernel's order.
  absl::StatusOr<std::vector<RingRecord>> Sample(int count = 1);
  // Takes one sample of this thread where `fault` writes to the fresh page
  // it is given (from code of the test's own, on a stack of its own, say),
  // and returns the records, decoded. `fault` runs twice: first unsampled,
  // on another page, so that its code and stack pages are in.
  absl::StatusOr<std::vector<RingRecord>> SampleFault(
      absl::FunctionRef<void(uint8_t* fresh_page)> fault);
  // The SAMPLE records of Sample(count), with the other records left out.
  absl::StatusOr<std::vector<SampleRecord>> SampleStacks(int count = 1);

  SamplerCounters counters() const { return sampler_->ReadCounters(); }
  BpfSampler& sampler() { return *sampler_; }

 private:
  // Maps `pages` fresh pages, has `fault` write to them with this thread's
  // page faults sampled, and decodes what the kernel sent.
  absl::StatusOr<std::vector<RingRecord>> SampleFaults(
      int pages, absl::FunctionRef<void(uint8_t* fresh_pages)> fault);

  ThreadSampler(std::unique_ptr<BpfSampler> sampler, int perf_fd)
      : sampler_(std::move(sampler)), perf_fd_(perf_fd) {}

  std::unique_ptr<BpfSampler> sampler_;
  int perf_fd_;
  std::vector<std::vector<uint8_t>> records_;
};

// pthread_self() of the calling thread: what CPython keeps as a thread
// state's thread_id, and what the walker compares with the task's fs base.
uint64_t ThisThreadId();

// Keeps the calling thread on the CPU it runs on now, for as long as it
// lives: each CPU keeps its own copies (the process it sampled last, its
// verdict on the pid filter), which a test of them must meet again.
class PinnedToThisCpu {
 public:
  PinnedToThisCpu();
  ~PinnedToThisCpu();
  PinnedToThisCpu(const PinnedToThisCpu&) = delete;
  PinnedToThisCpu& operator=(const PinnedToThisCpu&) = delete;

 private:
  cpu_set_t was_;
};

// For a test's SetUp: starts a ThreadSampler into `*sampler`. Where BPF
// cannot be used, leaves it null and fails the test, or skips it, naming
// it, where PYSTROBE_SKIP_BPF_TESTS=1 asks for that (ctest counts it as
// skipped); either way the test's body does not run.
void StartSamplerOrSkip(const SamplerConfig& config, std::unique_ptr<ThreadSampler>* sampler,
                        bool target_this_process = true);

}  // namespace pystrobe::bpf_test

#endif  // PYSTROBE_TESTS_BPF_BPF_TEST_SUPPORT_H_

#include "tests/bpf/bpf_test_support.h"

#include <linux/perf_event.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <span>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace pystrobe::bpf_test {
namespace {

// Writes one byte to each of `pages` fresh pages at `base`: one page fault
// each, in user mode, at an instruction of this function. Not inlined, and
// through a volatile pointer, so the writes are neither merged nor moved.
[[gnu::noinline]] void TouchPages(uint8_t* base, int pages) {
  volatile uint8_t* bytes = base;
  for (int i = 0; i < pages; ++i) bytes[static_cast<size_t>(i) * TargetMemory::kPageSize] = 1;
}

// This thread's page faults taken in user mode, each one a sample.
absl::StatusOr<int> OpenPageFaultEvent() {
  perf_event_attr attr = {};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_PAGE_FAULTS;
  attr.sample_period = 1;
  attr.disabled = 1;
  // Faults the kernel takes on the thread's behalf (copying a syscall's
  // arguments) are not the test's.
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, /*pid=*/0, /*cpu=*/-1,
                                    /*group_fd=*/-1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("open this thread's page-fault event: ", std::strerror(errno)));
  }
  return fd;
}

}  // namespace

uint64_t ThisThreadId() { return static_cast<uint64_t>(pthread_self()); }

PinnedToThisCpu::PinnedToThisCpu() {
  sched_getaffinity(0, sizeof(was_), &was_);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  sched_setaffinity(0, sizeof(one), &one);
}

PinnedToThisCpu::~PinnedToThisCpu() { sched_setaffinity(0, sizeof(was_), &was_); }

void StartSamplerOrSkip(const SamplerConfig& config, std::unique_ptr<ThreadSampler>* sampler,
                        bool target_this_process) {
  absl::StatusOr<std::unique_ptr<ThreadSampler>> started =
      ThreadSampler::Start(config, target_this_process);
  if (started.ok()) {
    *sampler = std::move(*started);
    return;
  }
  const char* skip = std::getenv("PYSTROBE_SKIP_BPF_TESTS");
  if (skip != nullptr && std::strcmp(skip, "1") == 0) {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    GTEST_SKIP() << "SKIPPED BPF test " << test->test_suite_name() << "." << test->name() << ": "
                 << started.status() << " (PYSTROBE_SKIP_BPF_TESTS=1)";
  }
  FAIL() << started.status() << "; set PYSTROBE_SKIP_BPF_TESTS=1 to skip the BPF tests instead";
}

// ---- TargetMemory -------------------------------------------------------------

TargetMemory::TargetMemory(size_t bytes) : size_(bytes) {
  void* mapping =
      mmap(nullptr, size_ + kPageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) std::abort();
  base_ = static_cast<uint8_t*>(mapping);
  // Written through, so every page is present when the kernel reads it.
  std::memset(base_, 0, size_);
  unreadable_ = reinterpret_cast<uint64_t>(base_ + size_);
  if (mprotect(base_ + size_, kPageSize, PROT_NONE) != 0) std::abort();
}

TargetMemory::~TargetMemory() {
  munmap(base_, size_ + kPageSize);
  for (void* pages : guarded_pages_) munmap(pages, 2 * kPageSize);
}

uint64_t TargetMemory::AllocatePageAboveUnreadable() {
  void* mapping =
      mmap(nullptr, 2 * kPageSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) std::abort();
  guarded_pages_.push_back(mapping);
  auto* pages = static_cast<uint8_t*>(mapping);
  std::memset(pages + kPageSize, 0, kPageSize);
  if (mprotect(pages, kPageSize, PROT_NONE) != 0) std::abort();
  return reinterpret_cast<uint64_t>(pages + kPageSize);
}

void TargetMemory::SetReadable(uint64_t page, bool readable) {
  if (mprotect(reinterpret_cast<void*>(page), kPageSize,
               readable ? PROT_READ | PROT_WRITE : PROT_NONE) != 0) {
    std::abort();
  }
}

uint64_t TargetMemory::Allocate(size_t bytes, size_t align) {
  size_t start = (used_ + align - 1) / align * align;
  if (start + bytes > size_) std::abort();
  used_ = start + bytes;
  return reinterpret_cast<uint64_t>(base_ + start);
}

void TargetMemory::WriteU64(uint64_t address, uint64_t value) {
  std::memcpy(reinterpret_cast<void*>(address), &value, sizeof(value));
}

void TargetMemory::WriteU32(uint64_t address, uint32_t value) {
  std::memcpy(reinterpret_cast<void*>(address), &value, sizeof(value));
}

void TargetMemory::WriteU8(uint64_t address, uint8_t value) {
  *reinterpret_cast<uint8_t*>(address) = value;
}

// ---- FakeCPython ----------------------------------------------------------------

namespace {
// Big enough for every offset of every version's _PyRuntime and
// PyInterpreterState (3.13's interpreter threads.head is at 7264), and of
// the smaller objects.
constexpr size_t kRootObjectBytes = 16384;
constexpr size_t kObjectBytes = 1024;
}  // namespace

FakeCPython::FakeCPython(const PythonLayout& layout, TargetMemory& memory)
    : offsets_(layout.abi), memory_(memory) {
  runtime_ = memory_.Allocate(kRootObjectBytes);
  interp_ = memory_.Allocate(kRootObjectBytes);
  code_type_ = memory_.Allocate(kObjectBytes);
  other_type_ = memory_.Allocate(kObjectBytes);
  WriteField(runtime_, offsets_.runtime_interpreters_head, interp_);
  // Up to 3.11 the GIL lives inside _PyRuntime; from 3.12 each interpreter
  // points at its own.
  if (offsets_.runtime_gil != PYSTROBE_PY_OFFSET_NONE) {
    gil_ = runtime_ + offsets_.runtime_gil;
  } else {
    gil_ = memory_.Allocate(kObjectBytes);
    WriteField(interp_, offsets_.interp_gil_ptr, gil_);
  }
}

void FakeCPython::WriteField(uint64_t object, uint32_t offset, uint64_t value) {
  if (offset == PYSTROBE_PY_OFFSET_NONE) std::abort();
  memory_.WriteU64(object + offset, value);
}

uint64_t FakeCPython::ReadU64(uint64_t address) const {
  uint64_t value;
  std::memcpy(&value, reinterpret_cast<const void*>(address), sizeof(value));
  return value;
}

pystrobe_python_process FakeCPython::process() const {
  return pystrobe_python_process{
      .runtime_addr = runtime_, .code_type_addr = code_type_, .offsets = offsets_};
}

uint64_t FakeCPython::AddThreadState(uint64_t thread_id) {
  uint64_t tstate = memory_.Allocate(kObjectBytes);
  WriteField(tstate, offsets_.tstate_thread_id, thread_id);
  if (offsets_.tstate_native_thread_id != PYSTROBE_PY_OFFSET_NONE) {
    memory_.WriteU32(tstate + offsets_.tstate_native_thread_id,
                     static_cast<uint32_t>(syscall(SYS_gettid)));
  }
  WriteField(tstate, offsets_.tstate_next, ReadU64(interp_ + offsets_.interp_tstate_head));
  WriteField(interp_, offsets_.interp_tstate_head, tstate);
  return tstate;
}

void FakeCPython::SetTopFrame(uint64_t tstate, uint64_t frame) {
  if (offsets_.frame_model != PYSTROBE_PY_FRAMES_CFRAME) {
    WriteField(tstate, offsets_.tstate_frame, frame);
    return;
  }
  uint64_t cframe = ReadU64(tstate + offsets_.tstate_frame);
  if (cframe == 0) {
    cframe = memory_.Allocate(kObjectBytes);
    WriteField(tstate, offsets_.tstate_frame, cframe);
  }
  WriteField(cframe, offsets_.cframe_current_frame, frame);
}

void FakeCPython::SetGil(bool locked, uint64_t last_holder) {
  WriteField(gil_, offsets_.gil_last_holder, last_holder);
  memory_.WriteU32(gil_ + offsets_.gil_locked, locked ? 1 : 0);
}

uint64_t FakeCPython::AddCode(uint64_t filename, uint64_t name, int32_t firstlineno) {
  uint64_t code = memory_.Allocate(kObjectBytes);
  RewriteCode(code, filename, name, firstlineno);
  return code;
}

void FakeCPython::RewriteCode(uint64_t code, uint64_t filename, uint64_t name,
                              int32_t firstlineno) {
  WriteField(code, offsets_.object_type, code_type_);
  WriteField(code, offsets_.code_filename, filename);
  WriteField(code, offsets_.code_name, name);
  // 3.11+ names a frame by co_qualname, the same str for a plain function.
  if (offsets_.code_qualname != PYSTROBE_PY_OFFSET_NONE) {
    WriteField(code, offsets_.code_qualname, name);
  }
  memory_.WriteU32(code + offsets_.code_firstlineno, static_cast<uint32_t>(firstlineno));
}

uint64_t FakeCPython::AddStr(std::string_view text, uint64_t address) {
  const size_t bytes = offsets_.unicode_ascii_data + text.size() + 1;
  if (address == 0) address = memory_.Allocate(bytes);
  memory_.WriteU64(address + offsets_.unicode_length, text.size());
  // kind 1 (a byte per character), compact, ascii.
  memory_.WriteU32(address + offsets_.unicode_state, (1u << offsets_.unicode_kind_shift) |
                                                         (1u << offsets_.unicode_compact_shift) |
                                                         (1u << offsets_.unicode_ascii_shift));
  std::memcpy(reinterpret_cast<void*>(address + offsets_.unicode_ascii_data), text.data(),
              text.size());
  memory_.WriteU8(address + offsets_.unicode_ascii_data + text.size(), 0);
  return address;
}

uint64_t FakeCPython::AddNonCodeObject() {
  uint64_t object = memory_.Allocate(kObjectBytes);
  WriteField(object, offsets_.object_type, other_type_);
  return object;
}

uint32_t FakeCPython::StampOf(uint64_t code) const {
  uint32_t firstlineno;
  std::memcpy(&firstlineno, reinterpret_cast<const void*>(code + offsets_.code_firstlineno),
              sizeof(firstlineno));
  return pystrobe_python_code_stamp32(pystrobe_python_code_stamp(
      ReadU64(code + offsets_.code_filename), ReadU64(code + offsets_.code_name), firstlineno));
}

uint64_t FakeCPython::AddHeapFrame(uint64_t code, int32_t instr_offset, uint64_t back) {
  uint64_t frame = memory_.Allocate(kObjectBytes);
  WriteField(frame, offsets_.frame_previous, back);
  WriteField(frame, offsets_.frame_code, code);
  // f_lasti: bytes up to 3.9, 2-byte code units on 3.10.
  int32_t lasti = offsets_.frame_model == PYSTROBE_PY_FRAMES_OBJECT_LASTI_UNITS ? instr_offset / 2
                                                                                : instr_offset;
  memory_.WriteU32(frame + offsets_.frame_instr, static_cast<uint32_t>(lasti));
  return frame;
}

void FakeCPython::WriteHeapFrameBack(uint64_t frame, uint64_t back) {
  WriteField(frame, offsets_.frame_previous, back);
}

void FakeCPython::WriteInterpreterFrame(uint64_t address, uint64_t code, int32_t instr_offset,
                                        uint64_t previous, uint8_t owner, bool is_entry) {
  WriteField(address, offsets_.frame_previous, previous);
  WriteField(address, offsets_.frame_code, code);
  // prev_instr / instr_ptr: a pointer into the code object's own bytecode.
  WriteField(address, offsets_.frame_instr,
             code + offsets_.code_code_adaptive + static_cast<int64_t>(instr_offset));
  memory_.WriteU8(address + offsets_.frame_owner, owner);
  if (offsets_.frame_is_entry != PYSTROBE_PY_OWNER_NONE) {
    memory_.WriteU8(address + offsets_.frame_is_entry, is_entry ? 1 : 0);
  }
}

void FakeCPython::WriteShimFrame(uint64_t address, uint64_t previous) {
  WriteField(address, offsets_.frame_previous, previous);
  // No code object the walk may read: it must skip the shim by its owner.
  WriteField(address, offsets_.frame_code, 0);
  memory_.WriteU8(address + offsets_.frame_owner, offsets_.frame_owner_cstack);
}

// ---- ThreadSampler ----------------------------------------------------------------

absl::StatusOr<std::unique_ptr<ThreadSampler>> ThreadSampler::Start(SamplerConfig config,
                                                                    bool target_this_process) {
  absl::StatusOr<std::unique_ptr<BpfSampler>> sampler = BpfSampler::Open();
  if (!sampler.ok()) return sampler.status();
  config.filter_pids = true;
  if (absl::Status s = (*sampler)->Configure(config); !s.ok()) return s;
  if (absl::Status s = (*sampler)->Load(); !s.ok()) return s;
  if (target_this_process) {
    if (absl::Status s = (*sampler)->AddTargetPid(static_cast<uint32_t>(getpid())); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<int> fd = OpenPageFaultEvent();
  if (!fd.ok()) return fd.status();
  std::unique_ptr<ThreadSampler> thread_sampler(new ThreadSampler(std::move(*sampler), *fd));
  ThreadSampler* self = thread_sampler.get();
  if (absl::Status s = self->sampler_->AttachToPerfEvent(*fd,
                                                         [self](std::span<const uint8_t> record) {
                                                           self->records_.emplace_back(
                                                               record.begin(), record.end());
                                                         });
      !s.ok()) {
    return s;
  }
  // libbpf enables the event as it attaches it: it stays off until Sample.
  if (ioctl(*fd, PERF_EVENT_IOC_DISABLE, 0) != 0) {
    return absl::InternalError(
        absl::StrCat("disable the page-fault event: ", std::strerror(errno)));
  }
  return thread_sampler;
}

ThreadSampler::~ThreadSampler() {
  sampler_->Detach();
  close(perf_fd_);
}

absl::Status ThreadSampler::SetPythonProcess(const pystrobe_python_process& process) {
  return sampler_->AddPythonProcess(static_cast<uint32_t>(getpid()), process);
}

absl::StatusOr<std::vector<RingRecord>> ThreadSampler::Sample(int count) {
  return SampleFaults(count, [count](uint8_t* pages) { TouchPages(pages, count); });
}

absl::StatusOr<std::vector<RingRecord>> ThreadSampler::SampleFault(
    absl::FunctionRef<void(uint8_t* fresh_page)> fault) {
  return SampleFaults(1, fault);
}

absl::StatusOr<std::vector<RingRecord>> ThreadSampler::SampleFaults(
    int pages, absl::FunctionRef<void(uint8_t* fresh_pages)> fault) {
  const size_t bytes = static_cast<size_t>(pages) * TargetMemory::kPageSize;
  // A first run, unsampled, faults in the code and stack pages the sampled
  // run takes (a function's first call faults on its text): the sampled run
  // then faults on the fresh pages alone.
  void* warm_up = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (warm_up == MAP_FAILED) return absl::InternalError("map pages to fault on");
  fault(static_cast<uint8_t*>(warm_up));
  munmap(warm_up, bytes);
  void* mapping = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) return absl::InternalError("map pages to fault on");
  // One fault, one page: no transparent huge page may fill several at once.
  madvise(mapping, bytes, MADV_NOHUGEPAGE);
  records_.clear();
  if (ioctl(perf_fd_, PERF_EVENT_IOC_ENABLE, 0) != 0) {
    munmap(mapping, bytes);
    return absl::InternalError(absl::StrCat("enable the page-fault event: ", std::strerror(errno)));
  }
  fault(static_cast<uint8_t*>(mapping));
  ioctl(perf_fd_, PERF_EVENT_IOC_DISABLE, 0);
  munmap(mapping, bytes);
  if (absl::Status s = sampler_->Drain(); !s.ok()) return s;
  std::vector<RingRecord> decoded;
  for (const std::vector<uint8_t>& record : records_) {
    absl::StatusOr<RingRecord> one = DecodeRingRecord(record);
    if (!one.ok()) return one.status();
    decoded.push_back(std::move(*one));
  }
  return decoded;
}

absl::StatusOr<std::vector<SampleRecord>> ThreadSampler::SampleStacks(int count) {
  absl::StatusOr<std::vector<RingRecord>> records = Sample(count);
  if (!records.ok()) return records.status();
  std::vector<SampleRecord> samples;
  for (RingRecord& record : *records) {
    if (auto* sample = std::get_if<SampleRecord>(&record)) samples.push_back(std::move(*sample));
  }
  return samples;
}

}  // namespace pystrobe::bpf_test

#include "daemon/recorder.h"
#include "absl/strings/string_view.h"

#include <cstddef>
#include <cstring>
#include <string_view>

#include "pystrobe_abi.h"

namespace pystrobe {
namespace {

// A comm from the kernel is NUL-padded, but not always NUL-terminated.
absl::string_view CommView(const char (&comm)[PYSTROBE_COMM_LEN]) {
  return absl::string_view(comm, strnlen(comm, PYSTROBE_COMM_LEN));
}

}  // namespace

void Recorder::HandleRecord(std::span<const uint8_t> record) {
  uint32_t kind = 0;
  if (record.size() < sizeof(kind)) {
    ++malformed_records_;
    return;
  }
  std::memcpy(&kind, record.data(), sizeof(kind));
  switch (kind) {
    case PYSTROBE_EVENT_SAMPLE:
      HandleSample(record);
      return;
    case PYSTROBE_EVENT_EXEC:
    case PYSTROBE_EVENT_EXIT: {
      pystrobe_process_event event;
      if (record.size() < sizeof(event)) break;
      std::memcpy(&event, record.data(), sizeof(event));
      if (kind == PYSTROBE_EVENT_EXEC) {
        processes_.OnExec(event.pid, CommView(event.comm));
      } else {
        processes_.OnExit(event.pid);
      }
      return;
    }
  }
  ++malformed_records_;
}

void Recorder::HandleSample(std::span<const uint8_t> record) {
  // Copy the fixed part out: ring buffer records are only 8-byte aligned.
  constexpr size_t kHeaderSize = offsetof(pystrobe_sample, data);
  pystrobe_sample header;
  if (record.size() < kHeaderSize) {
    ++malformed_records_;
    return;
  }
  std::memcpy(&header, record.data(), kHeaderSize);
  size_t frames = size_t{header.kernel_frames} + header.user_frames;
  if (header.kernel_frames > PYSTROBE_MAX_NATIVE_FRAMES ||
      header.user_frames > PYSTROBE_MAX_NATIVE_FRAMES ||
      record.size() < kHeaderSize + frames * sizeof(uint64_t)) {
    ++malformed_records_;
    return;
  }
  RawStack stack;
  stack.image = processes_.OnSample(header.pid, header.tid, CommView(header.comm));
  stack.tid = options_.threads ? header.tid : 0;
  const uint8_t* ips = record.data() + kHeaderSize;
  stack.kernel_ips.resize(header.kernel_frames);
  stack.user_ips.resize(header.user_frames);
  std::memcpy(stack.kernel_ips.data(), ips, header.kernel_frames * sizeof(uint64_t));
  std::memcpy(stack.user_ips.data(), ips + header.kernel_frames * sizeof(uint64_t),
              header.user_frames * sizeof(uint64_t));
  stacks_.Add(std::move(stack));
}

}  // namespace pystrobe

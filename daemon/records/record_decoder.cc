#include "daemon/records/record_decoder.h"

#include <cstddef>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bpf/pystrobe_abi.h"

namespace pystrobe {
namespace {

// A comm from the kernel is NUL-padded, but not always NUL-terminated.
std::string CommOf(const char (&comm)[PYSTROBE_COMM_LEN]) {
  return std::string(comm, strnlen(comm, PYSTROBE_COMM_LEN));
}

absl::Status DecodeSample(std::span<const uint8_t> record, uint32_t kind, RingRecord& out) {
  constexpr size_t kHeaderSize = offsetof(pystrobe_sample, data);
  if (record.size() < kHeaderSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("a sample record of ", record.size(), " bytes, shorter than its header"));
  }
  // Only the fixed part is copied: the data words follow, as many as used.
  pystrobe_sample header;
  std::memcpy(&header, record.data(), kHeaderSize);
  if (header.kernel_frames > PYSTROBE_MAX_NATIVE_FRAMES ||
      header.user_frames > PYSTROBE_MAX_USER_FRAMES ||
      header.python_frames > PYSTROBE_MAX_PYTHON_FRAMES) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a sample record with ", header.kernel_frames, " kernel, ", header.user_frames,
        " user and ", header.python_frames, " Python frames, more than the kernel writes"));
  }
  const size_t native_words = size_t{header.kernel_frames} + header.user_frames;
  const size_t words = native_words + 2 * size_t{header.python_frames};
  if (record.size() < kHeaderSize + words * sizeof(uint64_t)) {
    return absl::InvalidArgumentError(absl::StrCat("a sample record of ", record.size(),
                                                   " bytes, too short for its ", words,
                                                   " words of frames"));
  }
  SampleRecord* reused = std::get_if<SampleRecord>(&out);
  SampleRecord& sample = reused != nullptr ? *reused : out.emplace<SampleRecord>();
  sample.kind = kind;
  sample.pid = header.pid;
  sample.tid = header.tid;
  sample.cpu = header.cpu;
  sample.time_ns = header.time_ns;
  sample.cgroup_id = header.cgroup_id;
  sample.comm.assign(header.comm, strnlen(header.comm, PYSTROBE_COMM_LEN));
  sample.flags = header.flags;
  sample.python_status = header.python_status;
  sample.offcpu_reason = header.offcpu_reason;
  sample.weight_ns = header.weight_ns;
  sample.address = header.address;
  sample.interpreter_id = header.interpreter_id;
  const uint8_t* data = record.data() + kHeaderSize;
  sample.kernel_ips.resize(header.kernel_frames);
  sample.user_ips.resize(header.user_frames);
  std::memcpy(sample.kernel_ips.data(), data, header.kernel_frames * sizeof(uint64_t));
  std::memcpy(sample.user_ips.data(), data + header.kernel_frames * sizeof(uint64_t),
              header.user_frames * sizeof(uint64_t));
  const uint8_t* frames = data + native_words * sizeof(uint64_t);
  // Filled in place, field by field (see Recorder::HandleSample).
  sample.python_frames.resize(header.python_frames);
  for (size_t i = 0; i < header.python_frames; ++i) {
    pystrobe_python_frame frame;
    std::memcpy(&frame, frames + i * sizeof(frame), sizeof(frame));
    PythonFrameRecord& decoded = sample.python_frames[i];
    decoded.code = frame.code & ~PYSTROBE_PY_FRAME_ENTRY;
    decoded.stamp = frame.stamp;
    decoded.instr_offset = frame.instr_offset;
    decoded.eval_entry = (frame.code & PYSTROBE_PY_FRAME_ENTRY) != 0;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RingRecord> DecodeRingRecord(std::span<const uint8_t> record) {
  RingRecord decoded;
  if (absl::Status status = DecodeRingRecordInto(record, decoded); !status.ok()) return status;
  return decoded;
}

absl::Status DecodeRingRecordInto(std::span<const uint8_t> record, RingRecord& out) {
  uint32_t kind = 0;
  if (record.size() < sizeof(kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a record of ", record.size(), " bytes, too short for its kind"));
  }
  std::memcpy(&kind, record.data(), sizeof(kind));
  switch (kind) {
    case PYSTROBE_EVENT_SAMPLE:
    case PYSTROBE_EVENT_OFFCPU:
    case PYSTROBE_EVENT_MEMORY:
    case PYSTROBE_EVENT_ALLOC:
    case PYSTROBE_EVENT_OOM_KILLED:
      return DecodeSample(record, kind, out);
    case PYSTROBE_EVENT_FREE: {
      pystrobe_free_event event;
      if (record.size() < sizeof(event)) break;
      std::memcpy(&event, record.data(), sizeof(event));
      out = FreeRecord{.pid = event.pid, .address = event.address};
      return absl::OkStatus();
    }
    case PYSTROBE_EVENT_FINALIZE: {
      pystrobe_finalize_event event;
      if (record.size() < sizeof(event)) break;
      std::memcpy(&event, record.data(), sizeof(event));
      out = FinalizeRecord{.pid = event.pid};
      return absl::OkStatus();
    }
    case PYSTROBE_EVENT_EXEC:
    case PYSTROBE_EVENT_EXIT: {
      pystrobe_process_event event;
      if (record.size() < sizeof(event)) break;
      std::memcpy(&event, record.data(), sizeof(event));
      std::optional<PythonExecutable> python;
      if (kind == PYSTROBE_EVENT_EXEC && event.start_code != 0) {
        python = PythonExecutable{.dev = event.python_binary_dev,
                                  .inode = event.python_binary_inode,
                                  .start_code = event.start_code};
      }
      out = ProcessEventRecord{.kind = kind,
                               .pid = event.pid,
                               .time_ns = event.time_ns,
                               .comm = CommOf(event.comm),
                               .python_executable = python};
      return absl::OkStatus();
    }
    case PYSTROBE_EVENT_PYTHON_CODE: {
      absl::StatusOr<PythonCodeCopy> copy = ParsePythonCodeCopy(record);
      if (!copy.ok()) return copy.status();
      out = std::move(*copy);
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("a record of unknown kind ", kind));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("a record of kind ", kind, " and ", record.size(), " bytes, too short"));
}

}  // namespace pystrobe

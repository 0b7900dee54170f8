// The one decoder of the sampler's ring buffer records (bpf/pystrobe_abi.h):
// each record is validated once and turned into a typed event that every
// reader consumes: the recorder, the native unwind tracker, the accounting's
// sample tallies, the BPF tests. Nothing else reads a record's bytes, so an
// ABI change is made here alone. A record is only 8-byte aligned and a
// sample's data is cut to the words it uses, so every field is copied out and
// every count is checked against the record's size first.
#ifndef PYSTROBE_DAEMON_RECORDS_RECORD_DECODER_H_
#define PYSTROBE_DAEMON_RECORDS_RECORD_DECODER_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/python/code_copies.h"

namespace pystrobe {

// One Python frame as the kernel's walk recorded it.
struct PythonFrameRecord {
  uint64_t code = 0;         // PyCodeObject address in the target, entry bit cleared
  uint32_t stamp = 0;        // pystrobe_python_code_stamp32() of the code object
  int32_t instr_offset = 0;  // byte offset of the instruction; < 0: not started
  // The first frame its eval loop call ran (PYSTROBE_PY_FRAME_ENTRY).
  bool eval_entry = false;

  friend bool operator==(const PythonFrameRecord&, const PythonFrameRecord&) = default;
};

// A thread's stacks: SAMPLE, OFFCPU, MEMORY, ALLOC and OOM_KILLED records
// (struct pystrobe_sample, which says what each field means per kind).
struct SampleRecord {
  uint32_t kind = 0;  // enum pystrobe_event_kind
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t cpu = 0;
  uint64_t time_ns = 0;
  uint64_t cgroup_id = 0;
  std::string comm;             // up to its first NUL
  uint32_t flags = 0;           // enum pystrobe_sample_flags
  uint16_t python_status = 0;   // enum pystrobe_python_status
  uint32_t offcpu_reason = 0;   // enum pystrobe_offcpu_reason
  uint64_t weight_ns = 0;       // nanoseconds, or bytes for MEMORY and ALLOC
  uint64_t address = 0;         // ALLOC: the block's address
  uint64_t interpreter_id = 0;  // PyInterpreterState.id; 0: the main one, or unknown
  std::vector<uint64_t> kernel_ips;
  std::vector<uint64_t> user_ips;
  std::vector<PythonFrameRecord> python_frames;  // innermost first
};

// The executable a process exec'd, when the kernel knew it as one holding
// CPython (python_binaries): the file, and where the kernel loaded its text.
struct PythonExecutable {
  uint64_t dev = 0;  // the kernel's encoding, as struct super_block's s_dev
  uint64_t inode = 0;
  uint64_t start_code = 0;

  friend bool operator==(const PythonExecutable&, const PythonExecutable&) = default;
};

// A process exec'd (EXEC) or ended (EXIT).
struct ProcessEventRecord {
  uint32_t kind = 0;  // PYSTROBE_EVENT_EXEC or PYSTROBE_EVENT_EXIT
  uint32_t pid = 0;
  uint64_t time_ns = 0;
  std::string comm;  // the name after the event
  // EXEC of an executable the kernel knew as CPython's.
  std::optional<PythonExecutable> python_executable;
};

// A sampled block was freed (FREE).
struct FreeRecord {
  uint32_t pid = 0;
  uint64_t address = 0;
};

// A CPython process began its finalization (FINALIZE): what it holds now is
// what its own code kept.
struct FinalizeRecord {
  uint32_t pid = 0;
};

// Any record; a PYTHON_CODE record is a PythonCodeCopy (daemon/python).
using RingRecord =
    std::variant<SampleRecord, ProcessEventRecord, FreeRecord, FinalizeRecord, PythonCodeCopy>;

// Decodes one ring buffer record. InvalidArgument, saying why, for a record
// too short for its kind or its counts, counts beyond what the kernel
// writes, and kinds this build does not know.
absl::StatusOr<RingRecord> DecodeRingRecord(std::span<const uint8_t> record);
// The same into `out`: a sample decoded into a SampleRecord that `out`
// already holds reuses its buffers (no allocation per sample in a loop that
// decodes into one RingRecord). On error `out` holds whatever was there.
absl::Status DecodeRingRecordInto(std::span<const uint8_t> record, RingRecord& out);

// Decodes a stream of records, one at a time, into one reused RingRecord,
// and counts the malformed ones: the one place a sampling session's records
// are decoded, and where their drops are counted.
class RecordDecoder {
 public:
  // `record` decoded into the buffers of the record before (no allocation
  // per sample once they have grown), valid until the next call; null, and
  // counted, when malformed. A reader may move out of it.
  RingRecord* Decode(std::span<const uint8_t> record) {
    if (!DecodeRingRecordInto(record, decoded_).ok()) {
      ++malformed_;
      return nullptr;
    }
    return &decoded_;
  }
  // Records Decode() refused: dropped, with nothing read from them.
  uint64_t malformed() const { return malformed_; }

 private:
  RingRecord decoded_;
  uint64_t malformed_ = 0;
};

// A reader of a session's decoded records besides the recorder (`stat`'s
// sample tally, the daemon's on-demand accounting). It sees each record that
// decoded, before the recorder takes what it keeps from it.
class RecordObserver {
 public:
  virtual ~RecordObserver() = default;
  virtual void Observe(const RingRecord& record) = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDS_RECORD_DECODER_H_

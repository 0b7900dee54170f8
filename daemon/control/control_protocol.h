// The daemon's control socket protocol: how `pystrobe record` (and later
// `stat`, `top`) ask a running daemon for a profile instead of loading a
// second copy of the BPF programs.
//
// Every message, either way, is one frame: a 16-byte header, little-endian,
//   u32 magic    "PSTB" (0x42545350)
//   u16 version  kControlVersion
//   u16 type     ControlMessageType
//   u32 length   payload bytes that follow (a request at most
//                kMaxRequestPayload, a response frame at most
//                kMaxResponsePayload)
//   u32 reserved 0
// then `length` payload bytes.
//
// A connection carries one request. The client sends a request frame (and
// for a record without a duration, later a kStop frame with no payload); the
// daemon answers with any number of kInfo frames (a line for the user), then
// either kProfileChunk frames followed by kDone, or one kError. The payload of
// a request is text: "key=value" lines, every key known and at most once,
// every value checked (see ParseRecordRequest; a record request's keys are
// the wire keys of record's flag table, daemon/flags/record_flags.cc). The profile travels as the
// concatenation of the kProfileChunk payloads in the encoding of
// EncodeProfile: the symbolized Profile itself (frames with their kinds,
// native frames with their modules and file offsets, counts, labels), so the
// client writes any format with the usual writers.
#ifndef PYSTROBE_DAEMON_CONTROL_CONTROL_PROTOCOL_H_
#define PYSTROBE_DAEMON_CONTROL_CONTROL_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/flags/record_flags.h"
#include "model/profile.h"

namespace pystrobe {

inline constexpr uint32_t kControlMagic = 0x42545350;  // "PSTB" little-endian
inline constexpr uint16_t kControlVersion = 1;
inline constexpr size_t kControlHeaderSize = 16;
inline constexpr uint32_t kMaxRequestPayload = 64 * 1024;
inline constexpr uint32_t kMaxResponsePayload = 64 * 1024;

enum class ControlMessageType : uint16_t {
  // Requests.
  kRecord = 1,
  kStop = 2,  // ends a record without a duration (Ctrl-C on the client)
  kStat = 3,  // `pystrobe stat --pid`: counters, verdict and stacks over a window
  kTop = 4,   // `pystrobe top`: one interval's rows and hottest functions
  // Responses.
  kInfo = 0x81,
  kProfileChunk = 0x82,
  kDone = 0x83,
  kError = 0x84,
  kResult = 0x85,  // a chunk of a stat or top answer; kDone follows the last
};

struct ControlHeader {
  uint32_t magic = kControlMagic;
  uint16_t version = kControlVersion;
  uint16_t type = 0;
  uint32_t length = 0;
  uint32_t reserved = 0;
};

std::string EncodeHeader(const ControlHeader& header);
// Checks magic, version, reserved and that `length` is at most
// `max_payload`. The type is checked by whoever reads the payload.
absl::StatusOr<ControlHeader> ParseHeader(std::string_view bytes, uint32_t max_payload);
// A whole frame: header and payload.
std::string EncodeFrame(ControlMessageType type, std::string_view payload);
// Writes a whole frame to the socket `fd` (retrying on EINTR, never raising
// SIGPIPE). False when the peer is gone or the write failed.
bool SendFrame(int fd, ControlMessageType type, std::string_view payload);

// What a client asks `record` for: record's own options, those with a wire
// key in its flag table set (pids or all, duration, an explicit rate, the
// views the daemon's recordings honour), the rest at their defaults. The
// daemon samples at its own rate unless `rate_given`.
using RecordRequest = RecordOptions;

// The travelling flags of `request`, as record's flag table writes them.
std::string EncodeRecordRequest(const RecordRequest& request);
// A request frame's payload, read by the same table; InvalidArgument saying
// what is wrong (unknown or repeated key, bad value, not text, neither pids
// nor all, both, views that exclude each other...).
absl::StatusOr<RecordRequest> ParseRecordRequest(std::string_view payload);

// What a client asks `stat` for: one process over a window. The answer
// (kResult) is the stat report, as `stat --json` prints it or as its text.
struct StatRequest {
  uint32_t pid = 0;
  absl::Duration duration = absl::ZeroDuration();  // 1 ms to kMaxRemoteRecording
  bool json = false;

  friend bool operator==(const StatRequest&, const StatRequest&) = default;
};
std::string EncodeStatRequest(const StatRequest& request);
// Keys pid (required), duration_ms (required), json (0 or 1).
absl::StatusOr<StatRequest> ParseStatRequest(std::string_view payload);

// The longest interval of one top request.
inline constexpr absl::Duration kMaxTopInterval = absl::Minutes(1);
inline constexpr absl::Duration kMinTopInterval = absl::Milliseconds(100);

// What a client asks `top` for: the rows of one interval. The answer
// (kResult) is a TopSnapshot in the encoding of EncodeTopSnapshot.
struct TopRequest {
  std::optional<uint32_t> pid;  // per thread of one process; else every process
  absl::Duration interval = absl::Seconds(1);

  friend bool operator==(const TopRequest&, const TopRequest&) = default;
};
std::string EncodeTopRequest(const TopRequest& request);
// Keys interval_ms (required, 100 ms to 1 min) and pid.
absl::StatusOr<TopRequest> ParseTopRequest(std::string_view payload);

// One interval as the daemon counted it: raw counter deltas (the client
// turns them into figures as the local top does) and the hottest Python
// functions by samples.
struct TopSnapshotRow {
  uint32_t pid = 0;
  uint32_t tid = 0;  // 0 on a process row
  std::string comm;
  bool exited = false;
  bool free_threaded = false;      // a free-threaded CPython: no GIL to wait for
  std::vector<uint64_t> counters;  // pystrobe_task_counters, field by field
  // Resident memory at the end of the interval (process rows; rss_known:
  // the kernel has read it).
  bool rss_known = false;
  uint64_t rss_bytes = 0;

  friend bool operator==(const TopSnapshotRow&, const TopSnapshotRow&) = default;
};
struct TopSnapshotFunction {
  std::string name;
  uint64_t samples = 0;

  friend bool operator==(const TopSnapshotFunction&, const TopSnapshotFunction&) = default;
};
// NVML's figures over the interval, where the daemon has them: a section
// after the functions that is on the wire only then (a snapshot without it
// reads as before).
struct TopSnapshotGpuDevice {
  uint32_t index = 0;
  std::string name;
  double utilization = 0;  // 0..1
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;

  friend bool operator==(const TopSnapshotGpuDevice&, const TopSnapshotGpuDevice&) = default;
};
struct TopSnapshotGpuProcess {
  uint32_t pid = 0;        // host pid
  double utilization = 0;  // GPUs, summed over its devices
  uint64_t memory_bytes = 0;

  friend bool operator==(const TopSnapshotGpuProcess&, const TopSnapshotGpuProcess&) = default;
};
struct TopSnapshot {
  std::string title;
  double interval_seconds = 0;
  uint32_t cpus = 1;
  uint64_t function_samples = 0;
  std::vector<TopSnapshotRow> rows;
  std::vector<TopSnapshotFunction> functions;
  // Per thread (a pid's top): the whole process's resident memory.
  bool process_rss_known = false;
  uint64_t process_rss_bytes = 0;
  bool gpu = false;  // the GPU section is there
  std::vector<TopSnapshotGpuDevice> gpu_devices;
  std::vector<TopSnapshotGpuProcess> gpu_processes;

  friend bool operator==(const TopSnapshot&, const TopSnapshot&) = default;
};
std::string EncodeTopSnapshot(const TopSnapshot& snapshot);
// Checks every length against what is left; counters must have
// `counter_fields` entries per row.
absl::StatusOr<TopSnapshot> DecodeTopSnapshot(std::string_view bytes, size_t counter_fields);

// A whole request as the daemon reads it: header and payload together.
// Used by the server and by the parser's fuzz test.
struct ParsedRequest {
  ControlMessageType type;
  RecordRequest record;
  StatRequest stat;
  TopRequest top;
};
absl::StatusOr<ParsedRequest> ParseRequestFrame(std::string_view frame);

// The profile as kProfileChunk payloads carry it, and back. DecodeProfile
// checks every length against what is left.
std::string EncodeProfile(const Profile& profile);
absl::StatusOr<Profile> DecodeProfile(std::string_view bytes);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CONTROL_CONTROL_PROTOCOL_H_

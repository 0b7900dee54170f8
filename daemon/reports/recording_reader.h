// Reads back any recording pystrobe writes (folded stacks, pprof .pb.gz,
// speedscope JSON, OTLP requests) into one form the reports work on: stacks of frames
// {function, file, line}, with one value per sample type.
#ifndef PYSTROBE_DAEMON_REPORTS_RECORDING_READER_H_
#define PYSTROBE_DAEMON_REPORTS_RECORDING_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "model/profile.h"

namespace pystrobe {

// What ran in a frame, as far as the recording tells: the per-line columns
// of a report (Python, native, system, waiting) are read from it.
enum class RecordedFrameKind {
  kPython,       // a Python function: "qualname (file:line)"
  kInterpreter,  // the interpreter's own C code (python3.11, libpython, Py*/_Py* symbols)
  kNative,       // any other user-space code: C extensions, BLAS, libc
  kKernel,       // "symbol_[k]", or pprof's "[kernel]" mapping
  kMarker,       // a frame pystrobe adds: "[io wait]", "[native]", "[on-cpu]", "[unknown]"
};

// One frame as a report groups it. Python frames have a file and (unless
// recorded with --nolineno) a line; native, kernel and marker frames have
// only their name ("schedule_[k]", "libc.so.6+0x1f2a0", "[native]").
struct RecordedFrame {
  std::string function;
  std::string file;  // empty when the format does not say
  int64_t line = 0;  // 0 when unknown
  RecordedFrameKind kind = RecordedFrameKind::kNative;

  friend bool operator==(const RecordedFrame&, const RecordedFrame&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const RecordedFrame& f) {
    return H::combine(std::move(h), f.function, f.file, f.line, f.kind);
  }
};

// The kind of a frame known only by its name (folded, speedscope), from
// the names pystrobe gives frames: Python frames carry a file, kernel
// frames end "_[k]", markers are "[...]"; a native frame is the
// interpreter's when its module is python*/libpython* ("python3.11+0x14c981")
// or its symbol is CPython's (Py*, _Py*). `module` is the file a pprof
// mapping names, when there is one.
RecordedFrameKind ClassifyFrame(const RecordedFrame& frame, std::string_view module = "");

// What a value counts, as pprof names it: {"samples", "count"},
// {"cpu", "nanoseconds"}, {"wall", "nanoseconds"}, ...
struct RecordedSampleType {
  std::string type;
  std::string unit;
};

struct RecordedStack {
  std::vector<size_t> frames;   // indices into Recording::frames, root first
  std::vector<int64_t> values;  // one per Recording::sample_types
};

// The process and thread frames pystrobe puts at the root of each stack
// ("python3 (1234)", "MainThread tid=1234") are not functions: pprof keeps
// them as labels, and the reader drops them from folded and speedscope
// stacks so that every format gives the same functions.
struct Recording {
  std::string format;  // "folded", "pprof", "speedscope" or "otlp"
  std::vector<RecordedSampleType> sample_types;
  size_t default_sample_type = 0;  // index into sample_types
  std::vector<RecordedFrame> frames;
  std::vector<RecordedStack> stacks;

  // Adds `frame` to `frames` unless it is there; returns its index.
  size_t Intern(RecordedFrame frame);
  // The sum of one sample type's values over all stacks.
  int64_t Total(size_t sample_type) const;
  // The index of the sample type named `type`, or NotFound listing those there are.
  absl::StatusOr<size_t> SampleTypeIndex(std::string_view type) const;

 private:
  absl::flat_hash_map<RecordedFrame, size_t> frame_index_;
};

// Reads the file at `path`, recognising its format by its content: gzip
// (pprof), a JSON object (speedscope), other binary data (OTLP), otherwise
// folded text. Errors name
// the file and what is wrong with it (InvalidArgument), or why it could not
// be read (NotFound, PermissionDenied...).
absl::StatusOr<Recording> ReadRecording(const std::string& path);

// The same, on a file's bytes; `name` is what errors call it.
absl::StatusOr<Recording> ParseRecording(std::string_view data, std::string_view name);
absl::StatusOr<Recording> ParseFolded(std::string_view text, std::string_view name);
// `data` is the serialized profile.proto message, not gzipped.
absl::StatusOr<Recording> ParsePprof(std::string_view data, std::string_view name);
absl::StatusOr<Recording> ParseSpeedscope(std::string_view json, std::string_view name);
// `data` is a serialized OTLP ExportProfilesServiceRequest (record -f otlp):
// its profiles' sample types side by side, one stack per stack of the
// dictionary; cpu and off_cpu also summed as wall, the default type then.
absl::StatusOr<Recording> ParseOtlp(std::string_view data, std::string_view name);

// A profile still in memory (the daemon's recent windows) as a Recording,
// the stacks of process `pid` only when it is given. Its one sample type
// follows the profile's count unit: samples, wall microseconds (record
// --off-cpu's "[on-cpu]"/"[off-cpu]" roots kept, as the folded file keeps
// them), or bytes.
Recording RecordingFromProfile(const Profile& profile, std::optional<uint32_t> pid = std::nullopt);

// A frame's name as the folded format writes it: "function (file:line)" for
// frames with a file, otherwise the function.
std::string FrameDisplayName(const RecordedFrame& frame);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_REPORTS_RECORDING_READER_H_

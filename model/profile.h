// A symbolized profile: what every exporter turns into a file.
#ifndef PYSTROBE_MODEL_PROFILE_H_
#define PYSTROBE_MODEL_PROFILE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

namespace pystrobe {

// What a frame is; exporters colour and label by it.
enum class FrameKind {
  kProcess,  // "<comm> (<pid>)", the root of every stack
  kThread,   // "<thread name> tid=<tid>", with --threads
  kKernel,   // "symbol_[k]"
  kNative,   // a function in an executable or shared library, or "module+0xoff"
  kPython,   // "qualname (file:line)"
  kMarker,   // a frame pystrobe adds: "[truncated]", "[native]", "[io wait]"...
};

// The file a native (or kernel) frame's code lies in. One record per file,
// shared by every frame and profile that refers to it (see NativeNameCache).
struct NativeModule {
  // ELF virtual addresses of the file's code at some file offsets.
  struct Segment {
    uint64_t vaddr = 0;
    uint64_t size = 0;
    uint64_t file_offset = 0;

    friend bool operator==(const Segment&, const Segment&) = default;
  };

  // As the process saw it, e.g. "/usr/lib/x86_64-linux-gnu/libc.so.6";
  // "[vdso]"; "[kernel]".
  std::string path;
  // GNU build id in hex as `readelf -n` prints it; empty when unknown.
  std::string build_id;
  // The file's executable PT_LOAD segments; empty when the file could not be
  // read (then only file offsets are known).
  std::vector<Segment> code_segments;

  friend bool operator==(const NativeModule&, const NativeModule&) = default;
};

struct Frame {
  Frame() = default;
  Frame(std::string name, FrameKind kind, std::shared_ptr<const NativeModule> module = nullptr,
        uint64_t file_offset = 0)
      : name(std::move(name)), kind(kind), module(std::move(module)), file_offset(file_offset) {}

  std::string name;
  FrameKind kind = FrameKind::kNative;
  // Native frames: the module and the file offset of the address named
  // (return addresses minus one); null when no mapping held it. Kernel
  // frames: the "[kernel]" module, no offset. Profile merges stacks by names,
  // so a frame keeps the location of the first stack added with its names.
  std::shared_ptr<const NativeModule> module;
  uint64_t file_offset = 0;

  // Frames are the same frame by name and kind: where the code lies is
  // what the name was read from, not part of what the frame is.
  friend bool operator==(const Frame& a, const Frame& b) {
    return a.name == b.name && a.kind == b.kind;
  }
};

// One distinct stack, root first, how many samples landed on it (or the
// microseconds it weighs, see Profile::count_unit), and the time those samples
// stand for: each sample's interval on its CPU, or its time off CPU. 0 when
// unknown (a profile read back from a format without it).
struct ProfileStack {
  std::vector<Frame> frames;
  uint64_t count = 0;
  uint64_t nanoseconds = 0;
};

// A key and value an exporter attaches to samples (pprof labels, tags of a
// profile store).
struct ProfileLabel {
  std::string key;
  std::string value;

  friend bool operator==(const ProfileLabel&, const ProfileLabel&) = default;
};

// Stacks merged by their frames. Different address stacks that symbolize to
// the same names become one stack here.
class Profile {
 public:
  // Adds `count` samples on `frames` (root first), standing for `nanoseconds`.
  void Add(std::vector<Frame> frames, uint64_t count, uint64_t nanoseconds = 0);

  // Distinct stacks, in the order they were first added.
  const std::vector<ProfileStack>& stacks() const { return stacks_; }
  uint64_t total_count() const { return total_count_; }
  uint64_t total_nanoseconds() const { return total_nanoseconds_; }

  // Shown as the flame graph's title.
  std::string title;
  // Samples per second the profile was recorded at (0 when unknown).
  int sample_rate_hz = 0;
  // What a stack's count counts: "samples", "microseconds" when off-CPU
  // time is weighed in with on-CPU time, "bytes" of resident growth (record
  // --memory), "inuse_bytes" or "alloc_bytes" of sampled allocations (record
  // --allocations); for bytes, sampling_interval_bytes is the mean interval.
  std::string count_unit = "samples";
  uint64_t sampling_interval_bytes = 0;

  // When the recording began and how long it ran, when known (pprof's
  // time_nanos and duration_nanos).
  std::optional<absl::Time> start_time;
  std::optional<absl::Duration> duration;
  // Labels every sample carries (e.g. the configured static labels).
  std::vector<ProfileLabel> labels;
  // Labels the samples of one process carry, by its pid (the pid of the
  // stack's process frame): the hook for container id and Python version,
  // which belong to a process. Formats without labels ignore both.
  absl::flat_hash_map<uint32_t, std::vector<ProfileLabel>> process_labels;

 private:
  std::vector<ProfileStack> stacks_;
  absl::flat_hash_map<std::string, size_t> index_by_key_;
  uint64_t total_count_ = 0;
  uint64_t total_nanoseconds_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_MODEL_PROFILE_H_

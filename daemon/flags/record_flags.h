// The options of `pystrobe record`: one table of its flags (record_flags.cc)
// makes the command line's parser, `record --help`, and the control
// protocol's record request, whose keys are the rows' wire keys. A request
// the daemon reads is a RecordOptions with the travelling flags set, so the
// local and the daemon's paths read one struct, checked by one function.
#ifndef PYSTROBE_DAEMON_FLAGS_RECORD_FLAGS_H_
#define PYSTROBE_DAEMON_FLAGS_RECORD_FLAGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/flags/daemon_client_flags.h"
#include "daemon/flags/flag_table.h"

namespace pystrobe {

struct RecordOptions {
  // Exactly one kind of target: a command to start, running pids, or all.
  std::vector<std::string> command;
  std::vector<uint32_t> pids;
  bool all = false;

  int rate_hz = 99;
  // --rate was given: a daemon asked for the recording must sample at it
  // (else the daemon's own rate is used).
  bool rate_given = false;
  std::optional<absl::Duration> duration;  // none: until the target exits or a signal
  std::string format = "svg";
  std::string output;  // empty: pystrobe-<target>-<timestamp>.<format>
  bool threads = false;
  bool verbose = false;
  // Also write the summary's counters (samples, every drop) as JSON here.
  std::string summary_json;

  // CPython.
  bool native = false;          // keep native frames around Python frames
  bool gil_only = false;        // only samples whose thread held the GIL
  bool function_lines = false;  // line of the function's definition
  bool no_line_numbers = false;
  bool full_filenames = false;
  bool asyncio = false;      // label samples of asyncio tasks by task (--asyncio)
  bool memory = false;       // resident growth by stack, in bytes (--memory)
  bool allocations = false;  // sampled allocations still held at the end (--allocations)
  bool alloc_space = false;  // ... every sampled allocation, freed or not (--alloc-space)
  uint32_t alloc_sample_bytes = 512 * 1024;  // mean bytes between samples (--alloc-sample-bytes)
  int max_python_depth = 128;
  // Kernel memory for native unwind tables (--native-table-mib).
  int native_table_mib = 32;
  // Where unwind tables are kept across runs (--unwind-cache); "": nowhere.
  std::string unwind_cache = "/var/cache/pystrobe/unwind";
  bool subprocesses = false;  // follow children of the targets
  // The import time of each module, as a tree, instead of a profile: to
  // `output` when given, else to stderr.
  bool imports = false;

  // Off CPU.
  bool offcpu = false;  // on- and off-CPU time, each under its own root
  bool idle = false;    // off-CPU time folded in as samples, as py-spy --idle

  // Whether to ask a running daemon (--no-daemon, --socket).
  DaemonClientFlags daemon_client;
  bool help = false;  // -h/--help: print the usage and do nothing else

  friend bool operator==(const RecordOptions&, const RecordOptions&) = default;
};

inline constexpr int kMinRateHz = 1;
inline constexpr int kMaxRateHz = 1000;
inline constexpr int kMaxPythonDepth = 384;  // PYSTROBE_MAX_PYTHON_FRAMES
// The most pids one request to the daemon names.
inline constexpr size_t kMaxRemotePids = 1024;
// The longest recording a client may ask a daemon for.
inline constexpr absl::Duration kMaxRemoteRecording = absl::Hours(1);

// record's flags: parser, usage and wire keys.
const FlagTable<RecordOptions>& RecordFlags();

// Parses the arguments after "record". InvalidArgument names the bad flag or
// value. Does not check that the pids exist.
absl::StatusOr<RecordOptions> ParseRecordOptions(const std::vector<std::string>& args);

// The usage text for `pystrobe record`.
const char* RecordUsage();

// The checks between flags that hold for a recording made here and one a
// daemon makes ("--off-cpu and --idle exclude each other"); `given` names the
// flags of a command line (empty for a request).
absl::Status CheckRecordOptions(const RecordOptions& options, const FlagsGiven& given);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_FLAGS_RECORD_FLAGS_H_

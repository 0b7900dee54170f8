// The command line of `pystrobe record`, parsed and validated.
#ifndef PYSTROBE_DAEMON_CLI_RECORD_OPTIONS_H_
#define PYSTROBE_DAEMON_CLI_RECORD_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pystrobe {

struct RecordOptions {
  // Exactly one kind of target: a command to start, running pids, or all.
  std::vector<std::string> command;
  std::vector<uint32_t> pids;
  bool all = false;

  int rate_hz = 99;
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
  bool help = false;    // -h/--help: print the usage and do nothing else
};

inline constexpr int kMinRateHz = 1;
inline constexpr int kMaxRateHz = 1000;
inline constexpr int kMaxPythonDepth = 384;  // PYSTROBE_MAX_PYTHON_FRAMES

// Parses the arguments after "record". InvalidArgument names the bad flag or
// value. Does not check that the pids exist.
absl::StatusOr<RecordOptions> ParseRecordOptions(const std::vector<std::string>& args);

// The usage text for `pystrobe record`.
const char* RecordUsage();

// "pystrobe-<target>-<YYYYmmdd-HHMMSS>.<extension>", target being the
// command's base name, "pid<PID>" or "all".
std::string DefaultOutputPath(const RecordOptions& options, absl::Time now,
                              absl::string_view extension);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_RECORD_OPTIONS_H_

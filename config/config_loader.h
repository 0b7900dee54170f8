// Loads a DaemonConfig from YAML, checking it against the schema: unknown keys,
// wrong types and out-of-range values are errors naming the dotted key, the
// line and the column, and every error is reported (up to kMaxConfigErrors),
// not only the first. Command-line overrides go through the same validation.
#ifndef PYSTROBE_CONFIG_CONFIG_LOADER_H_
#define PYSTROBE_CONFIG_CONFIG_LOADER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "config/config.h"

namespace pystrobe {

inline constexpr int kMaxConfigErrors = 20;

struct ConfigError {
  std::string key;  // dotted path ("exporters.retention.max_age", "targets.pids[1]"); may be empty
  int line = 0;     // 1-based; 0 when unknown
  int column = 0;   // 1-based; 0 when unknown
  std::string message;

  // "SOURCE:LINE:COLUMN: KEY: MESSAGE", leaving out what is unknown.
  std::string ToString(absl::string_view source) const;
};

struct ConfigParseResult {
  std::string source;               // the file name as given, used in messages
  DaemonConfig config;              // meaningful only when ok()
  std::vector<ConfigError> errors;  // in file order, at most kMaxConfigErrors
  int errors_not_shown = 0;         // found beyond kMaxConfigErrors

  bool ok() const { return errors.empty(); }
  // One error per line, plus "... and N more errors" when some were not kept.
  std::string ErrorText() const;
};

// Parses YAML text. `source` names it in messages (a file name).
ConfigParseResult ParseConfig(absl::string_view yaml_text, absl::string_view source);

// Reads and parses a file. Non-OK only when the file cannot be read (NotFound,
// PermissionDenied, ...); configuration errors are in the result.
absl::StatusOr<ConfigParseResult> ReadConfigFile(const std::string& path);

// The command-line flags that override the file (read by the daemon's flag
// table, daemon/cli/daemon_options.cc). Values are the flags' text,
// validated exactly as the corresponding YAML keys.
struct ConfigOverrides {
  std::optional<std::string>
      prometheus_listen;                   // --prometheus-listen -> exporters.prometheus.listen
  std::optional<std::string> profile_dir;  // --profile-dir -> exporters.profile_dir
  std::optional<std::string> window;       // --window -> window
  std::optional<std::string> rate;         // --rate -> rate
};

// Applies the overrides to *config. On error *config is unchanged and the
// InvalidArgument message names every bad flag ("--rate: 0 is out of range (1
// to 1000)"), one per line.
absl::Status ApplyOverrides(const ConfigOverrides& overrides, DaemonConfig* config);

// What the daemon runs with: the file (or the defaults when `path` is empty)
// plus the overrides. Use at start and on SIGHUP; on error keep the running
// configuration. InvalidArgument carries every error, one per line; a file
// that cannot be read keeps its own code (NotFound, PermissionDenied).
absl::StatusOr<DaemonConfig> LoadEffectiveConfig(const std::string& path,
                                                 const ConfigOverrides& overrides);

}  // namespace pystrobe

#endif  // PYSTROBE_CONFIG_CONFIG_LOADER_H_

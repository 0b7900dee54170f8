// Turns libbpf's negative errno returns and its log into absl::Status values
// with context, once, at the boundary.
#ifndef PYSTROBE_DAEMON_LOADER_LIBBPF_ERRORS_H_
#define PYSTROBE_DAEMON_LOADER_LIBBPF_ERRORS_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pystrobe {

// "<what>: <strerror(-err)>" with the status code that errno maps to.
absl::Status LibbpfError(int err, absl::string_view what);

// libbpf logs through one process-wide callback. These route it into a buffer
// so that a failed load can quote the verifier, instead of dumping the log.
class LibbpfLog {
 public:
  // Installs the capturing callback; with `echo`, lines also go to stderr.
  static void Capture(bool echo);
  // Returns and clears what was logged since the last call.
  static std::string Take();
  // The verifier's own explanation within a captured log: the last verifier
  // line before its instruction count, or the last libbpf line. Empty if none.
  static std::string VerifierReason(absl::string_view log);
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_LOADER_LIBBPF_ERRORS_H_

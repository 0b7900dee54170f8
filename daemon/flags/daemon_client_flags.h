// --socket and --no-daemon: the flags of the commands a running daemon can
// answer (record, stat, top), rows of each of their tables.
#ifndef PYSTROBE_DAEMON_FLAGS_DAEMON_CLIENT_FLAGS_H_
#define PYSTROBE_DAEMON_FLAGS_DAEMON_CLIENT_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/flags/flag_table.h"

namespace pystrobe {

// Where the daemon listens unless told otherwise (daemon --socket).
inline constexpr char kDefaultControlSocket[] = "/run/pystrobe/pystrobe.sock";

struct DaemonClientFlags {
  std::string socket = kDefaultControlSocket;
  bool no_daemon = false;

  friend bool operator==(const DaemonClientFlags&, const DaemonClientFlags&) = default;
};

// The two rows for a command whose options keep them in `member`;
// `no_daemon_help` says what this command does without the daemon.
template <typename Options>
std::vector<Flag<Options>> DaemonClientRows(DaemonClientFlags Options::*member,
                                            std::string no_daemon_help) {
  Flag<Options> no_daemon =
      SwitchFlag<Options>({"--no-daemon"}, std::move(no_daemon_help),
                          [member](Options& options, absl::string_view, const std::string&) {
                            (options.*member).no_daemon = true;
                            return absl::OkStatus();
                          });
  Flag<Options> socket =
      ValueFlag<Options>({"--socket"}, "PATH",
                         "the daemon's socket (default /run/pystrobe/pystrobe.sock)",
                         [member](Options& options, absl::string_view, std::string value) {
                           (options.*member).socket = std::move(value);
                           return absl::OkStatus();
                         })
          .MissingValue("PATH");
  return {std::move(no_daemon), std::move(socket)};
}

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_FLAGS_DAEMON_CLIENT_FLAGS_H_

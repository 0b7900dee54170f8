// The client side of the daemon's control socket (daemon/control/control_protocol.h):
// `pystrobe record` asks a running daemon for the profile instead of loading
// its own copy of the BPF programs, and falls back to loading them when no
// daemon answers.
#ifndef PYSTROBE_DAEMON_CLI_CONTROL_CLIENT_H_
#define PYSTROBE_DAEMON_CLI_CONTROL_CLIENT_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/cli/record_options.h"
#include "daemon/control/control_protocol.h"
#include "exporters/profile_writer.h"
#include "model/profile.h"

namespace pystrobe {

// A connected socket to the daemon, or an error when nothing answers.
absl::StatusOr<int> ConnectToDaemon(const std::string& path);

// Sends `request` on `fd` and reads the answer: kInfo lines go to `info`,
// the profile is returned; the daemon's kError is returned as an error.
// While waiting, `stop` set sends kStop once (the daemon then ends the
// recording and answers with what it has).
absl::StatusOr<Profile> RecordThroughDaemon(int fd, const RecordRequest& request,
                                            const std::function<void(const std::string&)>& info,
                                            const std::atomic<int>* stop);

// Sends a stat or top request (`type`, `payload`) on `fd` and reads the
// answer: kInfo lines go to `info`, the kResult chunks are returned joined;
// the daemon's kError is returned as an error. While waiting, `stop` set
// sends kStop once (the daemon then answers with what it has), and
// `waiting` (may be empty) is called about every 100 ms.
absl::StatusOr<std::string> RequestThroughDaemon(
    int fd, ControlMessageType type, const std::string& payload,
    const std::function<void(const std::string&)>& info, const std::atomic<int>* stop,
    const std::function<void()>& waiting = {});

// `pystrobe record` through the daemon: nullopt when the recording must be
// local (--no-daemon, a command to start, --subprocesses, no daemon
// answering); else the exit status, the output written by `writer`. The
// request is `options` itself: the control protocol sends the flags whose
// rows in record's flag table travel.
std::optional<int> MaybeRecordThroughDaemon(const RecordOptions& options,
                                            const ProfileWriter& writer);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_CONTROL_CLIENT_H_

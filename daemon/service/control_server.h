// The daemon's control socket (daemon/control/control_protocol.h): a Unix stream
// socket, mode 0660 and group `pystrobe` when that group exists (else 0600,
// root only), where `pystrobe record` asks the running daemon for a profile.
// Every connection is checked with SO_PEERCRED: uid 0, or a member of group
// pystrobe (its primary group or getgrouplist), else refused with an error.
//
// An accept thread and one thread per connection (at most kMaxConnections)
// parse requests and stream answers; the recordings themselves run on the
// window loop's thread, which takes new jobs with TakeJobs().
#ifndef PYSTROBE_DAEMON_SERVICE_CONTROL_SERVER_H_
#define PYSTROBE_DAEMON_SERVICE_CONTROL_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/service/on_demand_recordings.h"

namespace pystrobe {

inline constexpr char kControlGroup[] = "pystrobe";

// What a control request asked for, as the daemon's counters name it;
// kUnknown when it was refused or broken before its type was read.
enum class ControlRequestKind { kRecord, kStat, kTop, kUnknown };
inline constexpr int kControlRequestKinds = 4;
// How a control request ended.
enum class ControlOutcome {
  kOk,                // answered
  kMalformed,         // a bad, hostile or unknown request: an error reply
  kPermissionDenied,  // SO_PEERCRED: neither root nor in group pystrobe
  kBusy,              // too many connections at once
  kAbandoned,         // the client went away before the answer
  kError,             // a good request that failed (a refused rate, a gone pid...)
};
inline constexpr int kControlOutcomes = 6;
// The Prometheus label values: "record", "stat", "top", "unknown"; "ok",
// "malformed", "permission_denied", "busy", "abandoned", "error".
const char* ControlRequestKindName(ControlRequestKind kind);
const char* ControlOutcomeName(ControlOutcome outcome);
// Whether a request of `kind` can end with `outcome` (what is exported).
bool ControlOutcomePossible(ControlRequestKind kind, ControlOutcome outcome);

// Whether a peer may use the socket: uid 0, or `group` (when it exists) is
// the peer's gid or one of its user's groups. The reason when not.
absl::Status CheckControlPeer(uid_t uid, gid_t gid, std::optional<gid_t> group);

class ControlServer {
 public:
  static constexpr int kMaxConnections = 16;

  // Creates the socket's directory when needed, refuses a path another
  // daemon answers on, replaces a stale socket, binds and listens.
  static absl::StatusOr<std::unique_ptr<ControlServer>> Start(const std::string& path);
  // Stops accepting, fails the jobs not yet taken, waits for every
  // connection's thread. The jobs taken must be completed first.
  ~ControlServer();

  const std::string& path() const { return path_; }
  // Jobs that arrived since the last call.
  std::vector<std::shared_ptr<RecordJob>> TakeJobs();
  // Called (on a connection's thread) when a job arrives, to wake whoever
  // takes them.
  void set_on_job(std::function<void()> on_job) {
    absl::MutexLock lock(&mu_);
    on_job_ = std::move(on_job);
  }

  struct Stats {
    uint64_t connections = 0;  // accepted, since the start
    int open_connections = 0;  // being served now
    // Requests by kind and outcome; each connection is one request.
    uint64_t requests[kControlRequestKinds][kControlOutcomes] = {};
    uint64_t& Requests(ControlRequestKind kind, ControlOutcome outcome) {
      return requests[static_cast<int>(kind)][static_cast<int>(outcome)];
    }
  };
  Stats stats() const;

 private:
  ControlServer(std::string path, int listen_fd, int wake_fd[2], std::optional<gid_t> group);
  void AcceptLoop();
  void Serve(int fd);

  struct Connection {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  const std::string path_;
  const int listen_fd_;
  const int wake_read_;
  const int wake_write_;
  const std::optional<gid_t> group_;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;

  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<RecordJob>> pending_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_job_ ABSL_GUARDED_BY(mu_);
  std::list<Connection> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<int> open_fds_ ABSL_GUARDED_BY(mu_);
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_CONTROL_SERVER_H_

#include "daemon/service/control_server.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/control/control_protocol.h"

namespace pystrobe {
namespace {

// A client has this long to send its request once connected.
constexpr int kRequestTimeoutMs = 5000;

absl::Status Errno(const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", strerror(errno)));
}

// Reads exactly `size` bytes, waiting at most until `deadline_ms` of
// poll time in all. False on EOF, error or timeout.
bool ReadExactly(int fd, size_t size, std::string& out, int timeout_ms) {
  out.resize(size);
  size_t got = 0;
  absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  while (got < size) {
    int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left <= 0) return false;
    pollfd p = {fd, POLLIN, 0};
    int ready = poll(&p, 1, left);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    ssize_t n = recv(fd, out.data() + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

void SendError(int fd, std::string_view message) {
  SendFrame(fd, ControlMessageType::kError, message.substr(0, kMaxResponsePayload));
}

std::optional<gid_t> ControlGroupId() {
  struct group storage;
  struct group* found = nullptr;
  std::vector<char> buffer(16384);
  if (getgrnam_r(kControlGroup, &storage, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return std::nullopt;
  }
  return found->gr_gid;
}

ControlRequestKind KindOf(uint16_t type) {
  switch (static_cast<ControlMessageType>(type)) {
    case ControlMessageType::kRecord:
      return ControlRequestKind::kRecord;
    case ControlMessageType::kStat:
      return ControlRequestKind::kStat;
    case ControlMessageType::kTop:
      return ControlRequestKind::kTop;
    default:
      return ControlRequestKind::kUnknown;
  }
}

}  // namespace

const char* ControlRequestKindName(ControlRequestKind kind) {
  switch (kind) {
    case ControlRequestKind::kRecord:
      return "record";
    case ControlRequestKind::kStat:
      return "stat";
    case ControlRequestKind::kTop:
      return "top";
    case ControlRequestKind::kUnknown:
      break;
  }
  return "unknown";
}

const char* ControlOutcomeName(ControlOutcome outcome) {
  switch (outcome) {
    case ControlOutcome::kOk:
      return "ok";
    case ControlOutcome::kMalformed:
      return "malformed";
    case ControlOutcome::kPermissionDenied:
      return "permission_denied";
    case ControlOutcome::kBusy:
      return "busy";
    case ControlOutcome::kAbandoned:
      return "abandoned";
    case ControlOutcome::kError:
      break;
  }
  return "error";
}

bool ControlOutcomePossible(ControlRequestKind kind, ControlOutcome outcome) {
  // Peers are checked, and turned away when too many, before anything is
  // read; a request whose type is unknown is malformed.
  switch (outcome) {
    case ControlOutcome::kPermissionDenied:
    case ControlOutcome::kBusy:
      return kind == ControlRequestKind::kUnknown;
    case ControlOutcome::kOk:
    case ControlOutcome::kAbandoned:
      return kind != ControlRequestKind::kUnknown;
    case ControlOutcome::kMalformed:
    case ControlOutcome::kError:
      return true;
  }
  return false;
}

absl::Status CheckControlPeer(uid_t uid, gid_t gid, std::optional<gid_t> group) {
  if (uid == 0) return absl::OkStatus();
  if (group) {
    if (gid == *group) return absl::OkStatus();
    struct passwd storage;
    struct passwd* user = nullptr;
    std::vector<char> buffer(16384);
    if (getpwuid_r(uid, &storage, buffer.data(), buffer.size(), &user) == 0 && user != nullptr) {
      int count = 256;
      std::vector<gid_t> groups(static_cast<size_t>(count));
      if (getgrouplist(user->pw_name, user->pw_gid, groups.data(), &count) >= 0) {
        groups.resize(static_cast<size_t>(count));
        if (std::find(groups.begin(), groups.end(), *group) != groups.end()) {
          return absl::OkStatus();
        }
      }
    }
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "permission denied: uid ", uid, " is neither root nor in group ", kControlGroup,
      group ? "" : " (the group does not exist on this host: only root may use the daemon)"));
}

absl::StatusOr<std::unique_ptr<ControlServer>> ControlServer::Start(const std::string& path) {
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("control socket path too long: ", path));
  }
  memcpy(address.sun_path, path.c_str(), path.size());
  std::error_code error;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::exists(dir, error)) {
    std::filesystem::create_directories(dir, error);
    if (error) {
      return absl::UnavailableError(
          absl::StrCat("create ", dir.string(), " for the control socket: ", error.message()));
    }
    chmod(dir.c_str(), 0755);
  }
  // A socket file that answers belongs to another daemon; one that does not
  // is left over from a daemon that was killed.
  if (std::filesystem::exists(path, error)) {
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool answered = probe >= 0 && connect(probe, reinterpret_cast<const sockaddr*>(&address),
                                          sizeof(address)) == 0;
    if (probe >= 0) close(probe);
    if (answered) {
      return absl::AlreadyExistsError(
          absl::StrCat("another pystrobe daemon answers on ", path, ": not serving it"));
    }
    unlink(path.c_str());
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("control socket");
  // Created without any access for others, then opened to the group.
  mode_t old_mask = umask(0177);
  int bound = bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
  umask(old_mask);
  if (bound != 0 || listen(fd, 16) != 0) {
    absl::Status status = Errno(absl::StrCat("bind control socket ", path));
    close(fd);
    return status;
  }
  std::optional<gid_t> group = ControlGroupId();
  if (group && chown(path.c_str(), 0, *group) == 0) {
    chmod(path.c_str(), 0660);
  } else {
    group.reset();
    chmod(path.c_str(), 0600);
  }
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    absl::Status status = Errno("control socket pipe");
    close(fd);
    return status;
  }
  std::unique_ptr<ControlServer> server(new ControlServer(path, fd, wake, group));
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

ControlServer::ControlServer(std::string path, int listen_fd, int wake_fd[2],
                             std::optional<gid_t> group)
    : path_(std::move(path)),
      listen_fd_(listen_fd),
      wake_read_(wake_fd[0]),
      wake_write_(wake_fd[1]),
      group_(group) {}

ControlServer::~ControlServer() {
  stopping_.store(true);
  char byte = 1;
  (void)!write(wake_write_, &byte, 1);
  if (acceptor_.joinable()) acceptor_.join();
  std::list<Connection> threads;
  {
    absl::MutexLock lock(&mu_);
    for (const std::shared_ptr<RecordJob>& job : pending_) {
      job->Complete(absl::UnavailableError("the daemon is stopping"));
    }
    pending_.clear();
    for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
    threads = std::move(connections_);
  }
  for (Connection& connection : threads) connection.thread.join();
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
  unlink(path_.c_str());
}

std::vector<std::shared_ptr<RecordJob>> ControlServer::TakeJobs() {
  absl::MutexLock lock(&mu_);
  return std::exchange(pending_, {});
}

ControlServer::Stats ControlServer::stats() const {
  absl::MutexLock lock(&mu_);
  Stats stats = stats_;
  stats.open_connections = active_;
  return stats;
}

void ControlServer::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (stopping_.load()) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    absl::MutexLock lock(&mu_);
    ++stats_.connections;
    if (active_ >= kMaxConnections) {
      ++stats_.Requests(ControlRequestKind::kUnknown, ControlOutcome::kBusy);
      SendError(fd, "the daemon is busy (too many control connections); try again");
      close(fd);
      continue;
    }
    // Threads of connections that ended are joined here, as new ones come.
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
    ++active_;
    open_fds_.push_back(fd);
    auto done = std::make_shared<std::atomic<bool>>(false);
    connections_.push_back({std::thread([this, fd, done] {
                              Serve(fd);
                              done->store(true);
                            }),
                            done});
  }
}

void ControlServer::Serve(int fd) {
  // Every connection ends in finish(), which counts it by kind and outcome.
  ControlRequestKind kind = ControlRequestKind::kUnknown;
  auto finish = [&](ControlOutcome outcome) {
    absl::MutexLock lock(&mu_);
    ++stats_.Requests(kind, outcome);
    open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
    --active_;
    close(fd);
  };
  auto bad = [&](std::string_view message) {
    SendError(fd, message);
    finish(ControlOutcome::kMalformed);
  };

  ucred peer = {};
  socklen_t size = sizeof(peer);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) {
    SendError(fd, "cannot read the peer's credentials (SO_PEERCRED)");
    return finish(ControlOutcome::kError);
  }
  if (absl::Status allowed = CheckControlPeer(peer.uid, peer.gid, group_); !allowed.ok()) {
    SendError(fd, std::string(allowed.message()));
    return finish(ControlOutcome::kPermissionDenied);
  }

  std::string header_bytes, payload;
  if (!ReadExactly(fd, kControlHeaderSize, header_bytes, kRequestTimeoutMs)) {
    return bad("bad request: truncated header (or none within 5 s)");
  }
  absl::StatusOr<ControlHeader> header = ParseHeader(header_bytes, kMaxRequestPayload);
  if (!header.ok()) return bad(std::string(header.status().message()));
  kind = KindOf(header->type);
  if (!ReadExactly(fd, header->length, payload, kRequestTimeoutMs)) {
    return bad("bad request: truncated payload");
  }
  absl::StatusOr<ParsedRequest> request = ParseRequestFrame(header_bytes + payload);
  if (!request.ok()) return bad(std::string(request.status().message()));

  std::shared_ptr<RecordJob> job;
  switch (request->type) {
    case ControlMessageType::kStat:
      job = std::make_shared<RecordJob>(request->stat);
      break;
    case ControlMessageType::kTop:
      job = std::make_shared<RecordJob>(request->top);
      break;
    default:
      job = std::make_shared<RecordJob>(request->record);
      break;
  }
  bool queued = false;
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_.load()) {
      pending_.push_back(job);
      queued = true;
      if (on_job_) on_job_();
    }
  }
  if (!queued) {
    SendError(fd, "the daemon is stopping");
    return finish(ControlOutcome::kError);
  }
  // Until the recording is over: pass on info lines, and watch the client
  // for kStop or a hang-up.
  bool client_gone = false;
  while (!job->WaitDone(absl::Milliseconds(100))) {
    for (const std::string& line : job->TakeInfo()) {
      if (!SendFrame(fd, ControlMessageType::kInfo, line)) client_gone = true;
    }
    pollfd p = {fd, POLLIN, 0};
    if (!client_gone && poll(&p, 1, 0) > 0) {
      std::string stop_bytes;
      absl::StatusOr<ControlHeader> stop;
      if (ReadExactly(fd, kControlHeaderSize, stop_bytes, 1000) &&
          (stop = ParseHeader(stop_bytes, 0)).ok() &&
          stop->type == static_cast<uint16_t>(ControlMessageType::kStop)) {
        job->RequestStop();
      } else {
        client_gone = true;
      }
    }
    if (client_gone) job->Abandon();
  }
  if (client_gone) return finish(ControlOutcome::kAbandoned);
  for (const std::string& line : job->TakeInfo()) {
    SendFrame(fd, ControlMessageType::kInfo, line);
  }
  if (!job->result().ok()) {
    SendError(fd, std::string(job->result().status().message()));
    return finish(ControlOutcome::kError);
  }
  // A profile for record; the answer's bytes for stat and top.
  bool profile = job->type() == ControlMessageType::kRecord;
  std::string encoded = profile ? EncodeProfile(*job->result()) : std::string();
  std::string_view rest = profile ? std::string_view(encoded) : std::string_view(job->answer());
  ControlMessageType chunk_type =
      profile ? ControlMessageType::kProfileChunk : ControlMessageType::kResult;
  bool ok = true;
  while (ok && !rest.empty()) {
    size_t n = std::min<size_t>(rest.size(), kMaxResponsePayload);
    ok = SendFrame(fd, chunk_type, rest.substr(0, n));
    rest.remove_prefix(n);
  }
  if (ok) ok = SendFrame(fd, ControlMessageType::kDone, "");
  finish(ok ? ControlOutcome::kOk : ControlOutcome::kAbandoned);
}

}  // namespace pystrobe

#include "daemon/service/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pystrobe {
namespace {

absl::string_view Absl(std::string_view text) { return {text.data(), text.size()}; }

}  // namespace

absl::Status SdNotifyTo(std::string_view address, std::string_view state) {
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  // An abstract address starts with a NUL byte instead of '@' and is not
  // NUL-terminated: its length is exact.
  if (address.size() < 2 || (address[0] != '/' && address[0] != '@')) {
    return absl::InvalidArgumentError(absl::StrCat("NOTIFY_SOCKET \"", Absl(address),
                                                   "\": not an absolute path or @abstract name"));
  }
  if (address.size() >= sizeof(sun.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("NOTIFY_SOCKET \"", Absl(address), "\": longer than a socket address"));
  }
  std::memcpy(sun.sun_path, address.data(), address.size());
  if (address[0] == '@') sun.sun_path[0] = '\0';
  socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() +
                                            (address[0] == '@' ? 0 : 1));

  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("notify socket: ", strerror(errno)));
  ssize_t sent;
  do {
    sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&sun),
                  length);
  } while (sent < 0 && errno == EINTR);
  int error = errno;
  close(fd);
  if (sent < 0) {
    return absl::UnavailableError(
        absl::StrCat("notifying systemd at ", Absl(address), ": ", strerror(error)));
  }
  if (static_cast<size_t>(sent) != state.size()) {
    return absl::UnavailableError(absl::StrCat("notifying systemd at ", Absl(address),
                                               ": short send of ", state.size(), " bytes"));
  }
  return absl::OkStatus();
}

absl::Status SdNotify(std::string_view state) {
  const char* address = std::getenv("NOTIFY_SOCKET");
  if (address == nullptr || address[0] == '\0') return absl::OkStatus();
  return SdNotifyTo(address, state);
}

absl::Status NotifyReady(std::string_view status) {
  if (status.empty()) return SdNotify("READY=1");
  return SdNotify(absl::StrCat("READY=1\nSTATUS=", Absl(status)));
}

absl::Status NotifyWatchdog() { return SdNotify("WATCHDOG=1"); }

absl::Status NotifyReloading() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t usec =
      static_cast<uint64_t>(now.tv_sec) * 1000000 + static_cast<uint64_t>(now.tv_nsec) / 1000;
  return SdNotify(absl::StrCat("RELOADING=1\nMONOTONIC_USEC=", usec));
}

absl::Status NotifyStopping() { return SdNotify("STOPPING=1"); }

std::optional<absl::Duration> WatchdogInterval() {
  const char* usec_text = std::getenv("WATCHDOG_USEC");
  if (usec_text == nullptr) return std::nullopt;
  uint64_t usec = 0;
  if (!absl::SimpleAtoi(usec_text, &usec) || usec == 0) return std::nullopt;
  // WATCHDOG_PID says which process the watchdog is for; a child that
  // inherited the environment must not ping.
  if (const char* pid_text = std::getenv("WATCHDOG_PID"); pid_text != nullptr) {
    int64_t pid = 0;
    if (!absl::SimpleAtoi(pid_text, &pid) || pid != getpid()) return std::nullopt;
  }
  return absl::Microseconds(usec);
}

}  // namespace pystrobe

// systemd's notification protocol (sd_notify(3)) without libsystemd: one
// datagram of "KEY=VALUE" lines to the AF_UNIX socket named by $NOTIFY_SOCKET
// (a path, or "@name" for an abstract socket). Outside systemd (the variable
// unset) every call is a no-op that succeeds.
//
// The unit (packaging/systemd/pystrobe.service) is Type=notify with
// WatchdogSec=: the daemon calls NotifyReady() once it samples, NotifyWatchdog()
// at half of WatchdogInterval() from the thread whose progress matters (the
// window loop), NotifyReloading()/NotifyReady() around a SIGHUP reload, and
// NotifyStopping() when SIGTERM arrives.
#ifndef PYSTROBE_DAEMON_SERVICE_SD_NOTIFY_H_
#define PYSTROBE_DAEMON_SERVICE_SD_NOTIFY_H_

#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace pystrobe {

// Sends `state` (newline-separated assignments) to $NOTIFY_SOCKET. OK when
// the variable is unset or empty; an error naming the socket when it cannot be
// sent.
absl::Status SdNotify(std::string_view state);

// Sends `state` to the socket `address` (a path, or "@name": abstract).
absl::Status SdNotifyTo(std::string_view address, std::string_view state);

// READY=1, with a STATUS= line when `status` is not empty.
absl::Status NotifyReady(std::string_view status = "");
// WATCHDOG=1.
absl::Status NotifyWatchdog();
// RELOADING=1 and MONOTONIC_USEC= (systemd 253+ uses the timestamp; older
// versions ignore it). Send NotifyReady() when the reload is done.
absl::Status NotifyReloading();
// STOPPING=1.
absl::Status NotifyStopping();

// The watchdog timeout systemd expects pings within: $WATCHDOG_USEC, when set,
// positive, and $WATCHDOG_PID (if set) is this process. Ping at half of it.
std::optional<absl::Duration> WatchdogInterval();

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_SD_NOTIFY_H_

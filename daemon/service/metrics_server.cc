#include "daemon/service/metrics_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace pystrobe {
namespace {

// civetweb's spelling of HOST:PORT: ":9464" (every address) is "9464".
std::string CivetListenAddress(const std::string& listen) {
  if (absl::StartsWith(listen, ":")) return listen.substr(1);
  return listen;
}

// The host a connection to `listen` should go to.
std::string WakeHost(const std::string& listen) {
  std::string host = listen.substr(0, listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0") return "127.0.0.1";
  if (host == "[::]") return "::1";
  if (absl::StartsWith(host, "[")) return host.substr(1, host.size() - 2);
  return host;
}

// Opens and at once closes a connection to `address`, which wakes a listener
// waiting in poll. Any failure is ignored: the listener's own timeout remains.
void Knock(const addrinfo& address) {
  int fd = socket(address.ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  // The address is this host's own, but a connect must not hang regardless.
  timeval timeout = {.tv_sec = 0, .tv_usec = 100'000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  connect(fd, address.ai_addr, address.ai_addrlen);
  close(fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen, std::shared_ptr<prometheus::Collectable> metrics) {
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(CivetListenAddress(listen), 2);
    exposer->RegisterCollectable(metrics);
    return std::unique_ptr<MetricsServer>(new MetricsServer(WakeHost(listen), std::move(exposer)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("serve Prometheus metrics on ", listen, ": ", e.what()));
  }
}

MetricsServer::~MetricsServer() {
  std::vector<addrinfo*> listeners;
  for (int port : exposer_->GetListeningPorts()) {
    addrinfo hints = {};
    hints.ai_flags = AI_NUMERICSERV;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(wake_host_.c_str(), std::to_string(port).c_str(), &hints, &found) == 0) {
      listeners.push_back(found);
    }
  }
  absl::Notification stopped;
  std::thread stopper([&] {
    exposer_.reset();
    stopped.Notify();
  });
  // A connection that lands before civetweb has begun to stop is served as an
  // empty request and the poll starts over, so knock until the stop is done.
  while (!stopped.WaitForNotificationWithTimeout(absl::Milliseconds(10))) {
    for (const addrinfo* listener : listeners) Knock(*listener);
  }
  stopper.join();
  for (addrinfo* listener : listeners) freeaddrinfo(listener);
}

}  // namespace pystrobe

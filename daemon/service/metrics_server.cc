#include "daemon/service/metrics_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <exception>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "CivetServer.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "prometheus/text_serializer.h"

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

void Send(mg_connection* conn, int status, std::string_view content_type, std::string_view body,
          bool head) {
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", content_type.data(),
                         static_cast<int>(content_type.size()));
  std::string length = std::to_string(body.size());
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  mg_response_header_send(conn);
  if (!head) mg_write(conn, body.data(), body.size());
}

}  // namespace

// Every path: /metrics in Prometheus' text format, the pages at theirs, and
// 404 elsewhere; 405 for any method but GET and HEAD.
class MetricsServer::Handler : public CivetHandler {
 public:
  Handler(std::shared_ptr<prometheus::Collectable> metrics, std::shared_ptr<const HttpPages> pages)
      : metrics_(std::move(metrics)), pages_(std::move(pages)) {}

  bool handleGet(CivetServer*, mg_connection* conn) override { return Answer(conn, false); }
  bool handleHead(CivetServer*, mg_connection* conn) override { return Answer(conn, true); }
  bool handlePost(CivetServer*, mg_connection* conn) override { return Refuse(conn); }
  bool handlePut(CivetServer*, mg_connection* conn) override { return Refuse(conn); }
  bool handleDelete(CivetServer*, mg_connection* conn) override { return Refuse(conn); }
  bool handlePatch(CivetServer*, mg_connection* conn) override { return Refuse(conn); }
  bool handleOptions(CivetServer*, mg_connection* conn) override { return Refuse(conn); }

 private:
  bool Answer(mg_connection* conn, bool head) {
    const mg_request_info* request = mg_get_request_info(conn);
    std::string_view path = request->local_uri != nullptr ? request->local_uri : "/";
    std::string_view query = request->query_string != nullptr ? request->query_string : "";
    if (path == "/metrics") {
      std::ostringstream text;
      prometheus::TextSerializer().Serialize(text, metrics_->Collect());
      Send(conn, 200, "text/plain; version=0.0.4; charset=utf-8", text.str(), head);
      return true;
    }
    if (pages_ != nullptr) {
      if (std::optional<PageResponse> page = pages_->Get(path, query)) {
        Send(conn, page->status, page->content_type, page->body, head);
        return true;
      }
    }
    Send(conn, 404, "text/plain; charset=utf-8",
         pages_ != nullptr ? "not found: try / or /metrics\n" : "not found: try /metrics\n", head);
    return true;
  }

  bool Refuse(mg_connection* conn) {
    Send(conn, 405, "text/plain; charset=utf-8", "read-only: GET and HEAD only\n", false);
    return true;
  }

  std::shared_ptr<prometheus::Collectable> metrics_;
  std::shared_ptr<const HttpPages> pages_;
};

MetricsServer::MetricsServer(std::string wake_host, std::unique_ptr<Handler> handler,
                             std::unique_ptr<CivetServer> server)
    : wake_host_(std::move(wake_host)), handler_(std::move(handler)), server_(std::move(server)) {}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen, std::shared_ptr<prometheus::Collectable> metrics,
    std::shared_ptr<const HttpPages> pages) {
  auto handler = std::make_unique<Handler>(std::move(metrics), std::move(pages));
  try {
    // Two threads, as prometheus-cpp's Exposer ran: a scrape and a page at once.
    std::vector<std::string> options = {"listening_ports", CivetListenAddress(listen),
                                        "num_threads", "2"};
    auto server = std::make_unique<CivetServer>(options);
    server->addHandler("/", handler.get());
    return std::unique_ptr<MetricsServer>(
        new MetricsServer(WakeHost(listen), std::move(handler), std::move(server)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("serve Prometheus metrics on ", listen, ": ", e.what()));
  }
}

MetricsServer::~MetricsServer() {
  std::vector<addrinfo*> listeners;
  for (int port : server_->getListeningPorts()) {
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
    server_.reset();
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

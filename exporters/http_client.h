// A minimal HTTP/1.1 client over POSIX sockets: one request per connection
// ("Connection: close"), a deadline for the whole exchange, http:// only.
// Enough to POST a profile to a profile store; not a general-purpose client
// (no TLS, no redirects, no proxies, no keep-alive).
#ifndef PYSTROBE_EXPORTERS_HTTP_CLIENT_H_
#define PYSTROBE_EXPORTERS_HTTP_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pystrobe {

// An http:// URL split into what a request needs.
struct HttpUrl {
  std::string host;  // a name, an IPv4 address, or an IPv6 address without brackets
  uint16_t port = 80;
  // The path the request paths go under, without a trailing slash: "" for
  // "http://host:4040" and "http://host:4040/", "/pyroscope" for
  // "http://host/pyroscope/".
  std::string path_prefix;

  // "host:port", with brackets around an IPv6 address: the Host header.
  std::string Authority() const;
};

// Parses "http://HOST[:PORT][/PATH]". HOST is a name, an IPv4 address or a
// bracketed IPv6 address. Refused, with a message that says why: other
// schemes (https:// is named: it needs TLS, which this client does not do),
// user info, a query or fragment, a missing host, a port outside 1..65535.
absl::StatusOr<HttpUrl> ParseHttpUrl(std::string_view url);

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method = "POST";
  std::string target;   // path and query, e.g. "/ingest?name=x"
  HttpHeaders headers;  // besides Host, Content-Length, Connection, User-Agent
  std::string body;
};

struct HttpResponse {
  int status = 0;
  std::string reason;
  HttpHeaders headers;
  std::string body;  // at most kMaxHttpResponseBody bytes are kept

  // The first header of that name (case-insensitive), if any.
  std::optional<std::string> Header(std::string_view name) const;
};

inline constexpr size_t kMaxHttpResponseBody = 64 * 1024;

// The bytes sent on the wire for `request` to `url` (request line, headers,
// body). Exposed for tests.
std::string SerializeHttpRequest(const HttpUrl& url, const HttpRequest& request);

// Parses a complete response (status line, headers, body by Content-Length,
// chunked, or up to the end). Exposed for tests.
absl::StatusOr<HttpResponse> ParseHttpResponse(std::string_view bytes);

// A deadline that another thread may bring forward while a request runs (a
// shutdown that must finish in time). Requests check it every 50 ms.
class SharedDeadline {
 public:
  void BringForward(absl::Time deadline) {
    int64_t nanos = absl::ToUnixNanos(deadline);
    int64_t current = unix_nanos_.load();
    while (nanos < current && !unix_nanos_.compare_exchange_weak(current, nanos)) {
    }
  }
  absl::Time Get() const { return absl::FromUnixNanos(unix_nanos_.load()); }

 private:
  std::atomic<int64_t> unix_nanos_{std::numeric_limits<int64_t>::max()};
};

// Sends `request` and reads the response, all within `timeout` (and before
// `cutoff`, when given). Errors:
// Unavailable when the host cannot be resolved or reached or the connection
// breaks, DeadlineExceeded when the timeout passes, InvalidArgument/DataLoss
// for a response that is not HTTP. Any HTTP status is a response, not an error.
// Note: name resolution (getaddrinfo) is not covered by the timeout.
absl::StatusOr<HttpResponse> SendHttpRequest(const HttpUrl& url, const HttpRequest& request,
                                             absl::Duration timeout,
                                             const SharedDeadline* cutoff = nullptr);

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_HTTP_CLIENT_H_

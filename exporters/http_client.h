// An HTTP(S) client for pushing profiles, over libcurl: TLS (a private CA,
// client certificates), basic or bearer authentication, the proxies of the
// environment (https_proxy, http_proxy, no_proxy: libcurl's default, kept),
// and a deadline per request that another thread may bring forward. One
// client holds one connection cache, so consecutive pushes reuse a connection
// and its TLS session. Redirects are not followed.
#ifndef PYSTROBE_EXPORTERS_HTTP_CLIENT_H_
#define PYSTROBE_EXPORTERS_HTTP_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pystrobe {

// An http:// or https:// URL split into what a request needs.
struct HttpUrl {
  bool https = false;
  std::string host;  // a name, an IPv4 address, or an IPv6 address without brackets
  uint16_t port = 80;
  // The path the request paths go under, without a trailing slash: "" for
  // "http://host:4040" and "http://host:4040/", "/pyroscope" for
  // "http://host/pyroscope/".
  std::string path_prefix;

  // "host:port", with brackets around an IPv6 address.
  std::string Authority() const;
  // "https://host:port". Never holds credentials: ParseHttpUrl refuses user info.
  std::string Origin() const;
  // The origin, the path prefix, then `path`: what messages name.
  std::string ToString(std::string_view path = "") const;
};

// Parses "http[s]://HOST[:PORT][/PATH]". HOST is a name, an IPv4 address or a
// bracketed IPv6 address. Refused, with a message that says why: other
// schemes, user info (credentials in a URL end up in logs: use the client's
// credentials), a query or fragment, a missing host, a port outside 1..65535.
absl::StatusOr<HttpUrl> ParseHttpUrl(std::string_view url);

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method = "POST";
  std::string target;   // the whole path (prefix included) and query: "/p/ingest?name=x"
  HttpHeaders headers;  // besides Host, Content-Length, User-Agent and authentication
  std::string body;
};

struct HttpResponse {
  int status = 0;
  std::string reason;
  HttpHeaders headers;  // the head's, then the trailers' (HTTP/2)
  std::string body;     // at most kMaxHttpResponseBody bytes are kept

  // The first header of that name (case-insensitive), if any.
  std::optional<std::string> Header(std::string_view name) const;
};

inline constexpr size_t kMaxHttpResponseBody = 64 * 1024;

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

struct HttpTlsOptions {
  std::string ca_file;    // PEM certificates to verify the server with; empty: the system's
  std::string cert_file;  // a client certificate (PEM); empty: none
  std::string key_file;   // its private key (PEM); empty: inside cert_file
  bool insecure_skip_verify = false;  // no check of the server's certificate or name

  friend bool operator==(const HttpTlsOptions&, const HttpTlsOptions&) = default;
};

// Secrets: sent, never put in a message.
struct HttpCredentials {
  std::string basic_username;  // with basic_password: Authorization: Basic
  std::string basic_password;
  std::string bearer_token;  // Authorization: Bearer

  friend bool operator==(const HttpCredentials&, const HttpCredentials&) = default;
};

struct HttpClientOptions {
  HttpTlsOptions tls;
  HttpCredentials credentials;
  // HTTP/2 only, as gRPC needs: over http:// without an Upgrade (prior
  // knowledge, what gRPC servers expect), over https:// by ALPN. Trailers
  // arrive in HttpResponse::headers after the head's.
  bool http2 = false;

  friend bool operator==(const HttpClientOptions&, const HttpClientOptions&) = default;
};

// Sends requests to one origin. Not thread-safe: one thread sends (the
// pusher's worker); the SharedDeadline is what other threads touch.
class HttpClient {
 public:
  // InvalidArgument for options that cannot go together (TLS files with an
  // http:// URL, a key without a certificate, half of a basic pair, basic and
  // bearer both); Internal when libcurl cannot start.
  static absl::StatusOr<std::unique_ptr<HttpClient>> Create(HttpUrl url,
                                                            const HttpClientOptions& options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  const HttpUrl& url() const { return url_; }

  // Sends `request` to the URL's origin and reads the response, all within `timeout` and before
  // `cutoff`, when given. Any HTTP status is a response, not an error. Errors name the URL (without
  // the query) and say what failed, by code:
  //   Unavailable       the host or proxy could not be resolved or reached
  //   Unauthenticated   TLS: the server's certificate was refused, the
  //                     handshake failed, or the client certificate or key
  //                     could not be used
  //   DeadlineExceeded  `timeout` passed
  //   Cancelled         `cutoff` passed
  //   DataLoss          the connection broke, or the answer was not HTTP
  //   Internal          anything else
  absl::StatusOr<HttpResponse> Send(const HttpRequest& request, absl::Duration timeout,
                                    const SharedDeadline* cutoff = nullptr);

 private:
  struct Curl;
  HttpClient(HttpUrl url, std::unique_ptr<Curl> curl);

  const HttpUrl url_;
  // The TLS settings and credentials live in the handle (libcurl copies them).
  std::unique_ptr<Curl> curl_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_HTTP_CLIENT_H_

#include "exporters/http_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pystrobe {
namespace {

constexpr absl::string_view kHttpScheme = "http://";
constexpr absl::string_view kUserAgent = "pystrobe";
// Status line and headers of a response; a store that sends more is broken.
constexpr size_t kMaxHttpResponseHead = 64 * 1024;

absl::Status UrlError(absl::string_view url, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("push URL \"", url, "\": ", why));
}

// A socket closed on every path out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// The deadline of one exchange: its own, and a shared cutoff.
struct Deadline {
  absl::Time own;
  const SharedDeadline* cutoff = nullptr;
  absl::Time Get() const { return cutoff == nullptr ? own : std::min(own, cutoff->Get()); }
};

// A poll never sleeps longer than this, so that a cutoff brought forward is
// seen soon.
constexpr int kMaxPollMillis = 50;

int MillisUntil(absl::Time deadline) {
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  // Rounded up, so that a poll never spins on a sub-millisecond remainder.
  return static_cast<int>(
      absl::ToInt64Milliseconds(left + absl::Milliseconds(1) - absl::Nanoseconds(1)));
}

// Waits until `fd` is ready for `events` or the deadline passes.
absl::Status WaitFor(int fd, short events, const Deadline& deadline, absl::string_view what) {
  while (true) {
    int millis = std::min(MillisUntil(deadline.Get()), kMaxPollMillis);
    if (millis == 0) return absl::DeadlineExceededError(absl::StrCat(what, ": timed out"));
    pollfd pfd{.fd = fd, .events = events, .revents = 0};
    int ready = poll(&pfd, 1, millis);
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat(what, ": poll: ", strerror(errno)));
    }
  }
}

// A non-blocking socket connected to one of the host's addresses.
absl::StatusOr<int> Connect(const HttpUrl& url, const Deadline& deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  std::string port = std::to_string(url.port);
  int gai = getaddrinfo(url.host.c_str(), port.c_str(), &hints, &addresses);
  if (gai != 0) {
    return absl::UnavailableError(absl::StrCat(
        "resolving ", url.host, ": ", gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai)));
  }
  std::string last_error = "no address";
  int connected = -1;
  for (addrinfo* ai = addresses; ai != nullptr && connected < 0; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = absl::StrCat("socket: ", strerror(errno));
      continue;
    }
    int result = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (result < 0 && errno == EINPROGRESS) {
      absl::Status waited = WaitFor(fd, POLLOUT, deadline, "connecting");
      if (!waited.ok()) {
        close(fd);
        freeaddrinfo(addresses);
        return absl::DeadlineExceededError(
            absl::StrCat("connecting to ", url.Authority(), ": timed out"));
      }
      int error = 0;
      socklen_t length = sizeof(error);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      result = error == 0 ? 0 : -1;
      errno = error;
    }
    if (result == 0) {
      connected = fd;
    } else {
      last_error = strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(addresses);
  if (connected < 0) {
    return absl::UnavailableError(
        absl::StrCat("connecting to ", url.Authority(), ": ", last_error));
  }
  return connected;
}

absl::Status SendAll(int fd, absl::string_view data, const Deadline& deadline) {
  while (!data.empty()) {
    ssize_t sent = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      data.remove_prefix(static_cast<size_t>(sent));
      continue;
    }
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      absl::Status waited = WaitFor(fd, POLLOUT, deadline, "sending the request");
      if (!waited.ok()) return waited;
      continue;
    }
    return absl::UnavailableError(absl::StrCat("sending the request: ", strerror(errno)));
  }
  return absl::OkStatus();
}

// Where the head ends ("\r\n\r\n"), or npos.
size_t HeadEnd(absl::string_view bytes) { return bytes.find("\r\n\r\n"); }

// True once `bytes` holds a whole response whose length is known from its
// headers (Content-Length, or the last chunk), so the read can stop without
// waiting for the server to close.
bool ResponseComplete(absl::string_view bytes) {
  size_t head_end = HeadEnd(bytes);
  if (head_end == absl::string_view::npos) return false;
  absl::string_view head = bytes.substr(0, head_end);
  std::string lower = absl::AsciiStrToLower(head);
  size_t at = lower.find("\r\ncontent-length:");
  if (at != std::string::npos) {
    size_t value_start = at + std::strlen("\r\ncontent-length:");
    size_t value_end = lower.find("\r\n", value_start);
    uint64_t length = 0;
    if (absl::SimpleAtoi(
            absl::StripAsciiWhitespace(absl::string_view(lower).substr(
                value_start,
                value_end == std::string::npos ? std::string::npos : value_end - value_start)),
            &length)) {
      return bytes.size() - (head_end + 4) >= length;
    }
  }
  if (absl::StrContains(lower, "\r\ntransfer-encoding:") && absl::StrContains(lower, "chunked")) {
    return absl::EndsWith(bytes, "\r\n0\r\n\r\n") ||
           absl::StartsWith(bytes.substr(head_end + 4), "0\r\n\r\n");
  }
  return false;
}

absl::StatusOr<std::string> DecodeChunked(absl::string_view body) {
  std::string out;
  while (true) {
    size_t line_end = body.find("\r\n");
    if (line_end == absl::string_view::npos) return absl::DataLossError("chunked body cut short");
    absl::string_view size_text = body.substr(0, line_end);
    size_text = size_text.substr(0, size_text.find(';'));  // chunk extensions
    uint64_t size = 0;
    if (!absl::SimpleHexAtoi(absl::StripAsciiWhitespace(absl::string_view(size_text)), &size)) {
      return absl::DataLossError("chunked body: bad chunk size");
    }
    body.remove_prefix(line_end + 2);
    if (size == 0) return out;
    if (body.size() < size + 2) return absl::DataLossError("chunked body cut short");
    if (out.size() < kMaxHttpResponseBody) {
      absl::string_view chunk =
          body.substr(0, std::min<size_t>(size, kMaxHttpResponseBody - out.size()));
      out.append(chunk.data(), chunk.size());
    }
    body.remove_prefix(size + 2);
  }
}

}  // namespace

std::string HttpUrl::Authority() const {
  bool ipv6 = host.find(':') != std::string::npos;
  return ipv6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

absl::StatusOr<HttpUrl> ParseHttpUrl(std::string_view url_in) {
  absl::string_view url(url_in.data(), url_in.size());
  if (url.empty()) return UrlError(url, "empty");
  std::string lower = absl::AsciiStrToLower(url.substr(0, std::min<size_t>(url.size(), 16)));
  if (absl::StartsWith(lower, "https://")) {
    return UrlError(url,
                    "https is not supported (this client does not do TLS); use http:// to the "
                    "store, or to a local proxy that adds TLS");
  }
  if (!absl::StartsWith(lower, kHttpScheme)) {
    return UrlError(url, "must start with http://");
  }
  absl::string_view rest = url.substr(kHttpScheme.size());
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return UrlError(url, "a query or fragment is not allowed (the push adds its own query)");
  }
  for (char c : rest) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return UrlError(url, "spaces and control characters are not allowed");
    }
  }
  size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  absl::string_view path = slash == absl::string_view::npos ? "" : rest.substr(slash);
  if (authority.find('@') != absl::string_view::npos) {
    return UrlError(url, "user info (user:password@) is not supported");
  }
  HttpUrl parsed;
  absl::string_view port_text;
  if (absl::StartsWith(authority, "[")) {
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) return UrlError(url, "unterminated [IPv6 address]");
    parsed.host = std::string(authority.substr(1, close - 1));
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return UrlError(url, "unexpected text after ]");
      port_text = after.substr(1);
      if (port_text.empty()) return UrlError(url, "empty port");
    }
    if (parsed.host.find(':') == std::string::npos) {
      return UrlError(url, "brackets are only for IPv6 addresses");
    }
  } else {
    size_t colon = authority.find(':');
    parsed.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) return UrlError(url, "empty port");
    }
    for (char c : parsed.host) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') {
        return UrlError(url,
                        absl::StrCat("'", std::string(1, c), "' is not allowed in a host name"));
      }
    }
  }
  if (parsed.host.empty()) return UrlError(url, "no host");
  if (!port_text.empty()) {
    int port = 0;
    bool digits = std::all_of(port_text.begin(), port_text.end(), [](char c) {
      return absl::ascii_isdigit(static_cast<unsigned char>(c));
    });
    if (!digits || port_text.size() > 5 || !absl::SimpleAtoi(port_text, &port) || port < 1 ||
        port > 65535) {
      return UrlError(url, absl::StrCat("port \"", port_text, "\" is not in 1..65535"));
    }
    parsed.port = static_cast<uint16_t>(port);
  }
  while (absl::EndsWith(path, "/")) path.remove_suffix(1);
  parsed.path_prefix = std::string(path);
  return parsed;
}

std::optional<std::string> HttpResponse::Header(std::string_view name_in) const {
  absl::string_view name(name_in.data(), name_in.size());
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return value;
  }
  return std::nullopt;
}

std::string SerializeHttpRequest(const HttpUrl& url, const HttpRequest& request) {
  std::string out = absl::StrCat(request.method, " ", request.target, " HTTP/1.1\r\n");
  // The Host header leaves out the default port, as browsers and Go do.
  bool ipv6 = url.host.find(':') != std::string::npos;
  std::string host = ipv6 ? absl::StrCat("[", url.host, "]") : url.host;
  if (url.port != 80) absl::StrAppend(&host, ":", url.port);
  absl::StrAppend(&out, "Host: ", host, "\r\n");
  absl::StrAppend(&out, "User-Agent: ", kUserAgent, "\r\n");
  for (const auto& [key, value] : request.headers) {
    absl::StrAppend(&out, key, ": ", value, "\r\n");
  }
  absl::StrAppend(&out, "Content-Length: ", request.body.size(), "\r\n");
  absl::StrAppend(&out, "Connection: close\r\n\r\n");
  out.append(request.body);
  return out;
}

absl::StatusOr<HttpResponse> ParseHttpResponse(std::string_view bytes_in) {
  absl::string_view bytes(bytes_in.data(), bytes_in.size());
  size_t head_end = HeadEnd(bytes);
  if (head_end == absl::string_view::npos) {
    return absl::DataLossError(bytes.empty() ? "the server closed the connection without a response"
                                             : "the response ended inside its headers");
  }
  absl::string_view head = bytes.substr(0, head_end);
  absl::string_view body = bytes.substr(head_end + 4);
  size_t line_end = head.find("\r\n");
  absl::string_view status_line = head.substr(0, line_end);
  HttpResponse response;
  // "HTTP/1.1 503 Service Unavailable"
  if (!absl::StartsWith(status_line, "HTTP/1.") || status_line.size() < 12 ||
      status_line[8] != ' ' || !absl::SimpleAtoi(status_line.substr(9, 3), &response.status) ||
      response.status < 100 || response.status > 599) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an HTTP response: \"", status_line.substr(0, 40), "\""));
  }
  if (status_line.size() > 13) response.reason = std::string(status_line.substr(13));
  absl::string_view fields = line_end == absl::string_view::npos ? "" : head.substr(line_end + 2);
  while (!fields.empty()) {
    size_t end = fields.find("\r\n");
    absl::string_view line = fields.substr(0, end);
    fields = end == absl::string_view::npos ? "" : fields.substr(end + 2);
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    response.headers.emplace_back(
        std::string(absl::StripAsciiWhitespace(absl::string_view(line.substr(0, colon)))),
        std::string(absl::StripAsciiWhitespace(absl::string_view(line.substr(colon + 1)))));
  }
  std::optional<std::string> encoding = response.Header("Transfer-Encoding");
  if (encoding && absl::StrContains(absl::AsciiStrToLower(*encoding), "chunked")) {
    absl::StatusOr<std::string> decoded = DecodeChunked(body);
    if (!decoded.ok()) return decoded.status();
    response.body = *std::move(decoded);
  } else {
    std::optional<std::string> length_text = response.Header("Content-Length");
    uint64_t length = body.size();
    if (length_text && absl::SimpleAtoi(*length_text, &length) && length < body.size()) {
      body = body.substr(0, length);
    }
    response.body = std::string(body.substr(0, kMaxHttpResponseBody));
  }
  return response;
}

absl::StatusOr<HttpResponse> SendHttpRequest(const HttpUrl& url, const HttpRequest& request,
                                             absl::Duration timeout, const SharedDeadline* cutoff) {
  Deadline deadline{.own = absl::Now() + timeout, .cutoff = cutoff};
  absl::StatusOr<int> connected = Connect(url, deadline);
  if (!connected.ok()) return connected.status();
  FileDescriptor fd(*connected);

  absl::Status sent = SendAll(fd.get(), SerializeHttpRequest(url, request), deadline);
  // A server may answer (e.g. 413) and close before reading the whole body:
  // read what it said before reporting the send error.
  std::string received;
  char buffer[16384];
  constexpr size_t kMaxResponse = kMaxHttpResponseHead + kMaxHttpResponseBody + 1024;
  while (received.size() < kMaxResponse && !ResponseComplete(received)) {
    ssize_t n = recv(fd.get(), buffer, sizeof(buffer), 0);
    if (n > 0) {
      received.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) break;  // the server closed: the response is complete
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      absl::Status waited = WaitFor(fd.get(), POLLIN, deadline, "waiting for the response");
      if (!waited.ok()) {
        return absl::DeadlineExceededError(
            absl::StrCat("waiting for the response from ", url.Authority(), ": timed out"));
      }
      continue;
    }
    if (received.empty()) {
      return absl::UnavailableError(absl::StrCat("reading the response: ", strerror(errno)));
    }
    break;
  }
  if (received.empty() && !sent.ok()) return sent;
  absl::StatusOr<HttpResponse> response = ParseHttpResponse(received);
  if (!response.ok() && received.empty()) {
    return absl::UnavailableError(
        absl::StrCat(url.Authority(), " closed the connection without a response"));
  }
  return response;
}

}  // namespace pystrobe

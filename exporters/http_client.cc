#include "exporters/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

namespace pystrobe {
namespace {

constexpr absl::string_view kHttpScheme = "http://";
constexpr absl::string_view kHttpsScheme = "https://";
constexpr char kUserAgent[] = "pystrobe";
// How long one wait for the sockets lasts at most, so that a cutoff brought
// forward is seen soon.
constexpr int kMaxPollMillis = 50;

// The URL as a message may quote it: user info, which ParseHttpUrl refuses,
// is blanked so that a password written there is not repeated.
std::string Redacted(absl::string_view url) {
  size_t scheme_end = url.find("://");
  size_t authority_start = scheme_end == absl::string_view::npos ? 0 : scheme_end + 3;
  size_t authority_end = url.find_first_of("/?#", authority_start);
  absl::string_view authority = url.substr(authority_start, authority_end == absl::string_view::npos
                                                                ? absl::string_view::npos
                                                                : authority_end - authority_start);
  size_t at = authority.rfind('@');
  if (at == absl::string_view::npos) return std::string(url);
  return absl::StrCat(url.substr(0, authority_start), "REDACTED", url.substr(authority_start + at));
}

absl::Status UrlError(absl::string_view url, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("push URL \"", Redacted(url), "\": ", why));
}

// libcurl's process-wide state, set up once and kept for the process's life.
bool CurlReady() {
  static const bool ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  return ready;
}

// What a failed transfer says, as a status code (see HttpClient::Send).
absl::StatusCode CodeOf(CURLcode result) {
  switch (result) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_PROXY:
      return absl::StatusCode::kUnavailable;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
      return absl::StatusCode::kUnauthenticated;
    case CURLE_OPERATION_TIMEDOUT:
      return absl::StatusCode::kDeadlineExceeded;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
      return absl::StatusCode::kDataLoss;
    default:
      return absl::StatusCode::kInternal;
  }
}

// What one transfer collects through libcurl's callbacks.
struct Exchange {
  HttpResponse response;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  size_t bytes = size * count;
  std::string& body = exchange->response.body;
  if (body.size() < kMaxHttpResponseBody) {
    body.append(data, std::min(bytes, kMaxHttpResponseBody - body.size()));
  }
  return bytes;  // all taken: the rest is dropped, not an error
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  size_t bytes = size * count;
  absl::string_view line = absl::StripTrailingAsciiWhitespace(absl::string_view(data, bytes));
  HttpResponse& response = exchange->response;
  if (absl::StartsWith(line, "HTTP/")) {
    // A new status line (after a 100 Continue, or a proxy's CONNECT answer):
    // only the last response's head counts. "HTTP/1.1 503 Service Unavailable".
    response.headers.clear();
    response.reason.clear();
    size_t space = line.find(' ');
    size_t reason = space == absl::string_view::npos ? space : line.find(' ', space + 1);
    if (reason != absl::string_view::npos) {
      response.reason = std::string(absl::StripAsciiWhitespace(line.substr(reason + 1)));
    }
    return bytes;
  }
  size_t colon = line.find(':');
  if (colon != absl::string_view::npos) {
    response.headers.emplace_back(std::string(absl::StripAsciiWhitespace(line.substr(0, colon))),
                                  std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  }
  return bytes;
}

// The headers of one request as libcurl takes them; freed with it.
class HeaderList {
 public:
  HeaderList() = default;
  HeaderList(const HeaderList&) = delete;
  HeaderList& operator=(const HeaderList&) = delete;
  ~HeaderList() { curl_slist_free_all(list_); }

  bool Add(const std::string& line) {
    curl_slist* next = curl_slist_append(list_, line.c_str());
    if (next == nullptr) return false;
    list_ = next;
    return true;
  }
  curl_slist* get() const { return list_; }

 private:
  curl_slist* list_ = nullptr;
};

}  // namespace

// One easy handle in one multi handle: the multi handle's poll lets a request
// wait on its sockets in short slices and look at the cutoff in between; the
// connection cache lives in it.
struct HttpClient::Curl {
  CURL* easy = nullptr;
  CURLM* multi = nullptr;
  char error[CURL_ERROR_SIZE] = {};

  ~Curl() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    if (multi != nullptr) curl_multi_cleanup(multi);
  }
};

std::string HttpUrl::Authority() const {
  bool ipv6 = host.find(':') != std::string::npos;
  return ipv6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

std::string HttpUrl::Origin() const {
  return absl::StrCat(https ? kHttpsScheme : kHttpScheme, Authority());
}

std::string HttpUrl::ToString(std::string_view path) const {
  return absl::StrCat(Origin(), path_prefix, absl::string_view(path.data(), path.size()));
}

absl::StatusOr<HttpUrl> ParseHttpUrl(std::string_view url_in) {
  absl::string_view url(url_in.data(), url_in.size());
  if (url.empty()) return UrlError(url, "empty");
  std::string lower = absl::AsciiStrToLower(url.substr(0, std::min<size_t>(url.size(), 16)));
  HttpUrl parsed;
  absl::string_view rest = url;
  if (absl::StartsWith(lower, kHttpsScheme)) {
    parsed.https = true;
    parsed.port = 443;
    rest.remove_prefix(kHttpsScheme.size());
  } else if (absl::StartsWith(lower, kHttpScheme)) {
    rest.remove_prefix(kHttpScheme.size());
  } else {
    return UrlError(url, "must start with http:// or https://");
  }
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
    return UrlError(url,
                    "user info (user:password@) is not allowed: credentials in a URL end up in "
                    "logs; use basic_auth or bearer_token_file");
  }
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

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Create(HttpUrl url,
                                                               const HttpClientOptions& options) {
  const HttpTlsOptions& tls = options.tls;
  bool any_tls = !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty() ||
                 tls.insecure_skip_verify;
  if (any_tls && !url.https) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS settings need an https:// URL, not ", url.ToString()));
  }
  if (!tls.key_file.empty() && tls.cert_file.empty()) {
    return absl::InvalidArgumentError("a client key needs its certificate (cert_file)");
  }
  const HttpCredentials& credentials = options.credentials;
  if (credentials.basic_username.empty() != credentials.basic_password.empty()) {
    return absl::InvalidArgumentError("basic authentication needs both a username and a password");
  }
  if (!credentials.basic_username.empty() && !credentials.bearer_token.empty()) {
    return absl::InvalidArgumentError(
        "basic authentication and a bearer token cannot both be used");
  }
  if (!CurlReady()) return absl::InternalError("libcurl could not be initialized");
  if (options.http2 && (curl_version_info(CURLVERSION_NOW)->features & CURL_VERSION_HTTP2) == 0) {
    return absl::FailedPreconditionError(
        "this libcurl has no HTTP/2 (it was built without nghttp2), which gRPC needs");
  }
  auto curl = std::make_unique<Curl>();
  curl->easy = curl_easy_init();
  curl->multi = curl_multi_init();
  if (curl->easy == nullptr || curl->multi == nullptr) {
    return absl::InternalError("libcurl could not make a handle");
  }
  CURL* easy = curl->easy;
  // What stays the same for every request.
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM: we are one thread of many
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy, CURLOPT_USERAGENT, kUserAgent);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, curl->error);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, OnHeader);
  if (options.http2) {
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION,
                     static_cast<long>(CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE));
    if (!url.https) {
      // Debian 12's libcurl (7.88) fails the second request on a reused
      // cleartext HTTP/2 connection with "Error in the HTTP2 framing layer"
      // (seen against grpcio 1.51; TLS connections reuse fine). One request
      // a window makes a connection per request cheap.
      curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L);
      curl_easy_setopt(easy, CURLOPT_FORBID_REUSE, 1L);
    }
  }
  if (!tls.ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, tls.ca_file.c_str());
  if (!tls.cert_file.empty()) {
    curl_easy_setopt(easy, CURLOPT_SSLCERT, tls.cert_file.c_str());
    curl_easy_setopt(easy, CURLOPT_SSLCERTTYPE, "PEM");
  }
  if (!tls.key_file.empty()) {
    curl_easy_setopt(easy, CURLOPT_SSLKEY, tls.key_file.c_str());
    curl_easy_setopt(easy, CURLOPT_SSLKEYTYPE, "PEM");
  }
  if (tls.insecure_skip_verify) {
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!credentials.basic_username.empty()) {
    curl_easy_setopt(easy, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BASIC));
    curl_easy_setopt(easy, CURLOPT_USERNAME, credentials.basic_username.c_str());
    curl_easy_setopt(easy, CURLOPT_PASSWORD, credentials.basic_password.c_str());
  } else if (!credentials.bearer_token.empty()) {
    curl_easy_setopt(easy, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_BEARER));
    curl_easy_setopt(easy, CURLOPT_XOAUTH2_BEARER, credentials.bearer_token.c_str());
  }
  // (libcurl copies every string it is given above.)
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(url), std::move(curl)));
}

HttpClient::HttpClient(HttpUrl url, std::unique_ptr<Curl> curl)
    : url_(std::move(url)), curl_(std::move(curl)) {}

HttpClient::~HttpClient() = default;

absl::StatusOr<HttpResponse> HttpClient::Send(const HttpRequest& request, absl::Duration timeout,
                                              const SharedDeadline* cutoff) {
  std::string where =
      absl::StrCat(url_.Origin(), request.target.substr(0, request.target.find('?')));
  auto fail = [&](absl::StatusCode code, absl::string_view why) {
    return absl::Status(code, absl::StrCat(request.method, " ", where, ": ", why));
  };
  if (cutoff != nullptr && cutoff->Get() <= absl::Now()) {
    return fail(absl::StatusCode::kCancelled, "cut short by the shutdown");
  }

  HeaderList headers;
  bool headers_ok = headers.Add("Expect:");  // no 100-continue wait before the body
  for (const auto& [name, value] : request.headers) {
    headers_ok = headers_ok && headers.Add(absl::StrCat(name, ": ", value));
  }
  if (!headers_ok) return fail(absl::StatusCode::kInternal, "out of memory");

  CURL* easy = curl_->easy;
  Exchange exchange;
  curl_->error[0] = '\0';
  std::string url = absl::StrCat(url_.Origin(), request.target);
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST,
                   request.method == "POST" ? nullptr : request.method.c_str());
  curl_easy_setopt(easy, CURLOPT_POST, 1L);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, request.body.data());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))));
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &exchange);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &exchange);

  if (curl_multi_add_handle(curl_->multi, easy) != CURLM_OK) {
    return fail(absl::StatusCode::kInternal, "libcurl refused the request");
  }
  bool cut = false;
  int running = 1;
  while (running > 0) {
    if (curl_multi_perform(curl_->multi, &running) != CURLM_OK) break;
    if (running == 0) break;
    if (cutoff != nullptr && absl::Now() >= cutoff->Get()) {
      cut = true;
      break;
    }
    curl_multi_poll(curl_->multi, nullptr, 0, kMaxPollMillis, nullptr);
  }
  CURLcode result = CURLE_OK;
  bool done = false;
  int left = 0;
  while (CURLMsg* message = curl_multi_info_read(curl_->multi, &left)) {
    if (message->msg == CURLMSG_DONE && message->easy_handle == easy) {
      result = message->data.result;
      done = true;
    }
  }
  curl_multi_remove_handle(curl_->multi, easy);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, nullptr);  // `headers` goes now
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, nullptr);

  if (cut) return fail(absl::StatusCode::kCancelled, "cut short by the shutdown");
  if (!done) return fail(absl::StatusCode::kInternal, "libcurl stopped without a result");
  if (result != CURLE_OK) {
    absl::StatusCode code = CodeOf(result);
    // The error buffer says more than the code's name ("SSL certificate
    // problem: unable to get local issuer certificate").
    std::string detail = curl_->error[0] != '\0' ? std::string(curl_->error)
                                                 : std::string(curl_easy_strerror(result));
    // With TLS 1.3 the server refuses a client certificate after the client
    // considers the handshake done: the refusal arrives as a read error
    // carrying the server's alert ("tlsv13 alert certificate required").
    if (code == absl::StatusCode::kDataLoss && absl::StrContains(detail, " alert ")) {
      code = absl::StatusCode::kUnauthenticated;
    }
    long os_errno = 0;  // libcurl's message leaves it out ("Couldn't connect to server")
    if (code == absl::StatusCode::kUnavailable &&
        curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os_errno) == CURLE_OK && os_errno != 0) {
      absl::StrAppend(&detail, " (", strerror(static_cast<int>(os_errno)), ")");
    }
    if (code == absl::StatusCode::kDeadlineExceeded) {
      return fail(
          code, absl::StrCat("timed out after ", absl::FormatDuration(timeout), " (", detail, ")"));
    }
    return fail(code, detail);
  }
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  exchange.response.status = static_cast<int>(status);
  return std::move(exchange.response);
}

}  // namespace pystrobe

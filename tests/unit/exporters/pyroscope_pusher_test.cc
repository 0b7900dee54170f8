// The push to a profile store: URL parsing, the ingest request, backoff, the
// queue bound, the libcurl client's errors and credentials, and the whole
// exchange against a receiver of ours on 127.0.0.1 that checks the protocol
// as Pyroscope's server reads it. (TLS against a server with its own CA is
// checked end to end: tests/e2e/test_daemon_push.py.)
#include "exporters/pyroscope_pusher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "exporters/http_client.h"
#include "exporters/profile.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/profile.h"

namespace pystrobe {
namespace {

namespace pb = ::perftools::profiles;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// --- URL parsing ----------------------------------------------------------

TEST(ParseHttpUrlTest, HostPortAndPrefix) {
  absl::StatusOr<HttpUrl> url = ParseHttpUrl("http://pyroscope:4040");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "pyroscope");
  EXPECT_EQ(url->port, 4040);
  EXPECT_EQ(url->path_prefix, "");

  url = ParseHttpUrl("HTTP://store.example.com/pyroscope/");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "store.example.com");
  EXPECT_EQ(url->port, 80);
  EXPECT_EQ(url->path_prefix, "/pyroscope");

  url = ParseHttpUrl("http://10.0.0.1:1/a/b");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "10.0.0.1");
  EXPECT_EQ(url->port, 1);
  EXPECT_EQ(url->path_prefix, "/a/b");
  EXPECT_EQ(url->ToString("/ingest"), "http://10.0.0.1:1/a/b/ingest");
}

TEST(ParseHttpUrlTest, HttpsDefaultsToPort443) {
  absl::StatusOr<HttpUrl> url = ParseHttpUrl("https://profiles.example.com/p/");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_TRUE(url->https);
  EXPECT_EQ(url->port, 443);
  EXPECT_EQ(url->ToString("/ingest"), "https://profiles.example.com:443/p/ingest");
}

TEST(ParseHttpUrlTest, UserInfoIsRefusedWithoutRepeatingThePassword) {
  absl::StatusOr<HttpUrl> url = ParseHttpUrl("https://alice:s3cret-pw@store/");
  ASSERT_FALSE(url.ok());
  std::string message(url.status().message());
  EXPECT_THAT(message, HasSubstr("basic_auth"));
  EXPECT_THAT(message, Not(HasSubstr("s3cret-pw")));
}

TEST(ParseHttpUrlTest, BracketedIpv6) {
  absl::StatusOr<HttpUrl> url = ParseHttpUrl("http://[::1]:4040/");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 4040);
  EXPECT_EQ(url->Authority(), "[::1]:4040");
}

TEST(ParseHttpUrlTest, RefusesWhatItCannotDoWithAReason) {
  struct Case {
    const char* url;
    const char* why;
  };
  for (const Case& c : std::vector<Case>{
           {"", "empty"},
           {"ftp://store", "must start with http:// or https://"},
           {"store:4040", "must start with http:// or https://"},
           {"http://", "no host"},
           {"http://:4040", "no host"},
           {"http://store:0", "not in 1..65535"},
           {"http://store:65536", "not in 1..65535"},
           {"http://store:http", "not in 1..65535"},
           {"http://store:", "empty port"},
           {"http://user:pw@store", "user info"},
           {"http://store/ingest?x=1", "query or fragment"},
           {"http://st ore", "spaces"},
           {"http://[::1", "unterminated"},
           {"http://[store]:80", "only for IPv6"},
           {"http://sto%re", "not allowed in a host name"},
       }) {
    absl::StatusOr<HttpUrl> url = ParseHttpUrl(c.url);
    ASSERT_FALSE(url.ok()) << c.url;
    EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(url.status().message()), HasSubstr(c.why)) << c.url;
  }
}

// --- the request ------------------------------------------------------------

PyroscopePushOptions Options(std::string url) {
  PyroscopePushOptions options;
  options.url = std::move(url);
  options.app_name = "pystrobe";
  options.labels = {{"role", "web"}, {"cluster", "prod-eu"}};
  return options;
}

TEST(IngestRequestTest, MultipartWithProfileFieldAndQuery) {
  PyroscopePushOptions options = Options("http://store:4040/prefix");
  HttpUrl url = *ParseHttpUrl(options.url);
  HttpRequest request = BuildIngestRequest(options, url, "GZ\x1f\x8b", absl::FromUnixSeconds(1000),
                                           absl::FromUnixSeconds(1060), 19, "BOUNDARY");
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(request.target,
            "/prefix/ingest?name=pystrobe%7Bcluster%3Dprod-eu%2Crole%3Dweb%7D&from=1000&until=1060"
            "&sampleRate=19&spyName=pystrobe&units=samples&aggregationType=sum");
  ASSERT_EQ(request.headers.size(), 1u);
  EXPECT_EQ(request.headers[0].first, "Content-Type");
  EXPECT_EQ(request.headers[0].second, "multipart/form-data; boundary=BOUNDARY");
  EXPECT_EQ(request.body,
            "--BOUNDARY\r\n"
            "Content-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n"
            "GZ\x1f\x8b\r\n--BOUNDARY--\r\n");
}

TEST(IngestRequestTest, RawPprofSaysFormatPprof) {
  PyroscopePushOptions options = Options("http://store");
  options.labels.clear();
  options.encoding = PushBodyEncoding::kRawPprof;
  HttpRequest request =
      BuildIngestRequest(options, *ParseHttpUrl(options.url), "BODY", absl::FromUnixSeconds(5),
                         absl::FromUnixSeconds(6), 0, "unused");
  EXPECT_EQ(request.target,
            "/ingest?name=pystrobe%7B%7D&from=5&until=6&spyName=pystrobe&units=samples"
            "&aggregationType=sum&format=pprof");
  EXPECT_EQ(request.headers[0].second, "application/octet-stream");
  EXPECT_EQ(request.body, "BODY");
}

TEST(IngestRequestTest, SubSecondWindowSpansASecond) {
  PyroscopePushOptions options = Options("http://store");
  HttpRequest request =
      BuildIngestRequest(options, *ParseHttpUrl(options.url), "", absl::FromUnixMillis(10'200),
                         absl::FromUnixMillis(10'700), 19, "b");
  EXPECT_THAT(request.target, HasSubstr("&from=10&until=11&"));
}

TEST(IngestRequestTest, OptionsAreValidatedWithClearErrors) {
  PyroscopePushOptions options = Options("http://store");
  EXPECT_TRUE(ValidatePushOptions(options).ok());
  options.app_name = "my app";
  EXPECT_THAT(std::string(ValidatePushOptions(options).status().message()),
              HasSubstr("app name \"my app\""));
  options = Options("http://store");
  options.labels["team"] = "a,b";
  EXPECT_THAT(std::string(ValidatePushOptions(options).status().message()),
              HasSubstr("label team=\"a,b\""));
  options = Options("http://store");
  options.labels["bad-key"] = "x";
  EXPECT_THAT(std::string(ValidatePushOptions(options).status().message()),
              HasSubstr("label name \"bad-key\""));
  options = Options("http://store");
  options.policy.max_queue = 0;
  EXPECT_FALSE(ValidatePushOptions(options).ok());
  options = Options("http://store");
  options.headers = {{"X-Key", "a\r\nInjected: yes"}};
  EXPECT_FALSE(ValidatePushOptions(options).ok());
  EXPECT_TRUE(PyroscopePusher::Create(Options("https://store")).ok());
}

TEST(IngestRequestTest, TenantAndExtraHeadersAreSent) {
  PyroscopePushOptions options = Options("http://store");
  options.tenant_id = "team-a";
  options.headers = {{"X-Api-Key", "k"}};
  HttpRequest request = BuildIngestRequest(options, *ParseHttpUrl(options.url), "", absl::Now(),
                                           absl::Now(), 19, "b");
  EXPECT_THAT(request.headers,
              Contains(std::pair<std::string, std::string>("X-Scope-OrgID", "team-a")));
  EXPECT_THAT(request.headers, Contains(std::pair<std::string, std::string>("X-Api-Key", "k")));
}

// --- backoff ----------------------------------------------------------------

TEST(PushBackoffTest, DoublesFromInitialUpToMaxWithJitterBelow) {
  PyroscopePushOptions options;
  options.policy.initial_backoff = absl::Milliseconds(500);
  options.policy.max_backoff = absl::Seconds(4);
  options.policy.jitter = 0.5;
  // uniform 0: no jitter, the schedule itself.
  EXPECT_EQ(PushBackoff(options.policy, 1, 0.0), absl::Milliseconds(500));
  EXPECT_EQ(PushBackoff(options.policy, 2, 0.0), absl::Seconds(1));
  EXPECT_EQ(PushBackoff(options.policy, 3, 0.0), absl::Seconds(2));
  EXPECT_EQ(PushBackoff(options.policy, 4, 0.0), absl::Seconds(4));
  EXPECT_EQ(PushBackoff(options.policy, 5, 0.0), absl::Seconds(4));
  EXPECT_EQ(PushBackoff(options.policy, 1000, 0.0), absl::Seconds(4));  // no overflow
  // Jitter takes at most half off.
  EXPECT_EQ(PushBackoff(options.policy, 2, 0.5), absl::Milliseconds(750));
  EXPECT_EQ(PushBackoff(options.policy, 2, 1.0), absl::Milliseconds(500));
  for (double u : {0.0, 0.1, 0.37, 0.99}) {
    absl::Duration d = PushBackoff(options.policy, 3, u);
    EXPECT_GE(d, absl::Seconds(1));
    EXPECT_LE(d, absl::Seconds(2));
  }
}

TEST(PushBackoffTest, RetryAfterSecondsOrHttpDate) {
  absl::Time now = absl::FromUnixSeconds(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  EXPECT_EQ(ParseRetryAfter("120", now), absl::Seconds(120));
  EXPECT_EQ(ParseRetryAfter(" 0 ", now), absl::ZeroDuration());
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:50:07 GMT", now), absl::Seconds(30));
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:00:00 GMT", now), absl::ZeroDuration());
  EXPECT_EQ(ParseRetryAfter("soon", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("-5", now), std::nullopt);
}

TEST(PushBackoffTest, WhichStatusesAreRetried) {
  for (int status : {408, 429, 500, 502, 503, 504})
    EXPECT_TRUE(IsRetryableStatus(status)) << status;
  for (int status : {400, 401, 403, 404, 413, 422})
    EXPECT_FALSE(IsRetryableStatus(status)) << status;
}

// --- a receiver on 127.0.0.1 ------------------------------------------------

std::string Gunzip(const std::string& compressed) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);  // gzip only
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buffer[4096];
  int result = Z_OK;
  while (result == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    result = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
  }
  EXPECT_EQ(result, Z_STREAM_END);
  inflateEnd(&stream);
  return out;
}

std::string PercentDecode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      out.push_back(static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else if (text[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

struct ReceivedRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
};

// How the receiver answers one request.
struct Reply {
  int status = 200;
  std::string headers;  // extra lines, each ending in \r\n
  bool hang = false;    // read the request, never answer
};
Reply Status(int status, std::string headers = "") {
  Reply reply;
  reply.status = status;
  reply.headers = std::move(headers);
  return reply;
}
Reply Hang() {
  Reply reply;
  reply.hang = true;
  return reply;
}

// A one-connection-at-a-time HTTP server: records each request and answers
// with the next scripted reply (200 once the script is used up).
class LoopbackReceiver {
 public:
  LoopbackReceiver() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(listen_fd_, 16), 0);
    socklen_t length = sizeof(addr);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &length);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~LoopbackReceiver() {
    stop_ = true;
    thread_.join();
    close(listen_fd_);
  }

  std::string url() const { return absl::StrCat("http://127.0.0.1:", port_, "/pyro"); }
  uint16_t port() const { return port_; }
  void Script(std::vector<Reply> replies) {
    absl::MutexLock lock(&mu_);
    script_.assign(replies.begin(), replies.end());
  }
  std::vector<ReceivedRequest> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd pfd{.fd = listen_fd_, .events = POLLIN, .revents = 0};
      if (poll(&pfd, 1, 20) <= 0) continue;
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      HandleConnection(fd);
      close(fd);
    }
  }

  // Reads until the headers and Content-Length bytes of body are in.
  bool ReadRequest(int fd, std::string& head, std::string& body) {
    std::string data;
    char buffer[65536];
    size_t head_end = std::string::npos;
    size_t length = 0;
    while (true) {
      if (head_end != std::string::npos && data.size() >= head_end + 4 + length) break;
      pollfd pfd{.fd = fd, .events = POLLIN, .revents = 0};
      if (stop_) return false;
      if (poll(&pfd, 1, 20) <= 0) continue;
      ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      data.append(buffer, static_cast<size_t>(n));
      if (head_end == std::string::npos &&
          (head_end = data.find("\r\n\r\n")) != std::string::npos) {
        std::string lower = data.substr(0, head_end);
        for (char& c : lower) c = static_cast<char>(tolower(c));
        size_t at = lower.find("content-length:");
        if (at != std::string::npos) length = std::stoul(lower.substr(at + 15));
      }
    }
    head = data.substr(0, head_end);
    body = data.substr(head_end + 4, length);
    return true;
  }

  void HandleConnection(int fd) {
    std::string head, body;
    if (!ReadRequest(fd, head, body)) return;
    ReceivedRequest request;
    size_t line_end = head.find("\r\n");
    std::string request_line = head.substr(0, line_end);
    size_t sp1 = request_line.find(' ');
    size_t sp2 = request_line.rfind(' ');
    request.method = request_line.substr(0, sp1);
    std::string target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
    size_t question = target.find('?');
    request.path = target.substr(0, question);
    std::string query = question == std::string::npos ? "" : target.substr(question + 1);
    size_t start = 0;
    while (start < query.size()) {
      size_t amp = query.find('&', start);
      std::string pair =
          query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
      size_t eq = pair.find('=');
      request.query[PercentDecode(pair.substr(0, eq))] =
          eq == std::string::npos ? "" : PercentDecode(pair.substr(eq + 1));
      if (amp == std::string::npos) break;
      start = amp + 1;
    }
    size_t pos = line_end + 2;
    while (pos < head.size()) {
      size_t end = head.find("\r\n", pos);
      if (end == std::string::npos) end = head.size();
      std::string line = head.substr(pos, end - pos);
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(tolower(c));
      request.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
      pos = end + 2;
    }
    request.body = std::move(body);
    Reply reply;
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(std::move(request));
      if (!script_.empty()) {
        reply = script_.front();
        script_.pop_front();
      }
    }
    if (reply.hang) {  // until the client gives up and closes
      char byte;
      while (!stop_) {
        pollfd pfd{.fd = fd, .events = POLLIN, .revents = 0};
        if (poll(&pfd, 1, 10) > 0 && recv(fd, &byte, 1, 0) <= 0) return;
      }
      return;
    }
    std::string text = reply.status == 200 ? "" : absl::StrCat("status ", reply.status);
    std::string response = absl::StrCat("HTTP/1.1 ", reply.status, " X\r\n", reply.headers,
                                        "Content-Length: ", text.size(), "\r\n\r\n", text);
    send(fd, response.data(), response.size(), MSG_NOSIGNAL);
  }

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable absl::Mutex mu_;
  std::deque<Reply> script_ ABSL_GUARDED_BY(mu_);
  std::vector<ReceivedRequest> requests_ ABSL_GUARDED_BY(mu_);
};

// The form field `name` of a multipart/form-data body, as Go's
// multipart.Reader (Pyroscope's server) finds it.
std::string FormField(const ReceivedRequest& request, const std::string& name) {
  const std::string& type = request.headers.at("content-type");
  EXPECT_THAT(type, StartsWith("multipart/form-data; boundary="));
  std::string boundary = type.substr(type.find("boundary=") + 9);
  std::string delimiter = "--" + boundary;
  const std::string& body = request.body;
  EXPECT_THAT(body, StartsWith(delimiter + "\r\n"));
  EXPECT_TRUE(body.ends_with("\r\n" + delimiter + "--\r\n"));
  size_t part = 0;
  while ((part = body.find(delimiter + "\r\n", part)) != std::string::npos) {
    size_t headers_end = body.find("\r\n\r\n", part);
    std::string headers = body.substr(part, headers_end - part);
    size_t content = headers_end + 4;
    size_t next = body.find("\r\n" + delimiter, content);
    if (headers.find("name=\"" + name + "\"") != std::string::npos) {
      return body.substr(content, next - content);
    }
    part = next + 2;
  }
  ADD_FAILURE() << "no form field " << name;
  return "";
}

Profile TestProfile() {
  Profile profile;
  profile.sample_rate_hz = 19;
  profile.labels.push_back({"cluster", "prod-eu"});
  profile.Add({{"python3 (42)", FrameKind::kProcess},
               {"main", FrameKind::kNative},
               {"work (app.py:7)", FrameKind::kPython}},
              5);
  profile.Add({{"python3 (42)", FrameKind::kProcess}, {"idle", FrameKind::kNative}}, 2);
  return profile;
}

// Waits up to 10 s for `done`.
template <typename F>
bool Eventually(F done) {
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

PyroscopePushOptions FastOptions(std::string url) {
  PyroscopePushOptions options = Options(std::move(url));
  options.policy.initial_backoff = absl::Milliseconds(10);
  options.policy.max_backoff = absl::Milliseconds(40);
  options.policy.timeout = absl::Seconds(2);
  return options;
}

uint64_t Accounted(const PushStats& s) {
  return s.sent + s.rejected + s.failed + s.dropped_queue_full + s.dropped_shutdown + s.queued;
}

// A loopback port nobody listens on.
uint16_t ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t length = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  close(fd);
  return ntohs(addr.sin_port);
}

HttpRequest IngestLikeRequest() {
  return HttpRequest{.method = "POST",
                     .target = "/pyro/ingest?name=app%7Bteam%3Dx%7D",
                     .headers = {{"Content-Type", "application/octet-stream"}},
                     .body = "profile"};
}

TEST(HttpClientTest, ConnectionRefusedNamesTheUrlWithoutCredentials) {
  uint16_t port = ClosedPort();
  HttpClientOptions options;
  options.credentials.basic_username = "alice";
  options.credentials.basic_password = "s3cret-pw";
  auto client =
      HttpClient::Create(*ParseHttpUrl(absl::StrCat("http://127.0.0.1:", port, "/pyro")), options);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<HttpResponse> response = (*client)->Send(IngestLikeRequest(), absl::Seconds(2));
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable) << response.status();
  EXPECT_EQ(PushErrorReasonOf(response.status()), PushErrorReason::kConnect);
  std::string message(response.status().message());
  EXPECT_THAT(message, StartsWith(absl::StrCat("POST http://127.0.0.1:", port, "/pyro/ingest: ")));
  EXPECT_THAT(message, HasSubstr("Connection refused"));
  EXPECT_THAT(message, Not(HasSubstr("s3cret-pw")));
  EXPECT_THAT(message, Not(HasSubstr("alice")));
  EXPECT_THAT(message, Not(HasSubstr("name=")));  // the query (labels) stays out
}

TEST(HttpClientTest, RefusesSettingsThatCannotGoTogether) {
  HttpClientOptions tls_on_http;
  tls_on_http.tls.ca_file = "/etc/ssl/certs/ca-certificates.crt";
  EXPECT_THAT(
      std::string(
          HttpClient::Create(*ParseHttpUrl("http://store"), tls_on_http).status().message()),
      HasSubstr("need an https:// URL"));
  HttpClientOptions key_alone;
  key_alone.tls.key_file = "/etc/client.key";
  EXPECT_THAT(
      std::string(HttpClient::Create(*ParseHttpUrl("https://store"), key_alone).status().message()),
      HasSubstr("needs its certificate"));
  HttpClientOptions half_basic;
  half_basic.credentials.basic_username = "alice";
  EXPECT_FALSE(HttpClient::Create(*ParseHttpUrl("https://store"), half_basic).ok());
  HttpClientOptions both;
  both.credentials = {.basic_username = "a", .basic_password = "b", .bearer_token = "t"};
  EXPECT_FALSE(HttpClient::Create(*ParseHttpUrl("https://store"), both).ok());
}

TEST(HttpClientTest, NoAnswerWithinTheTimeoutIsDeadlineExceeded) {
  LoopbackReceiver receiver;
  receiver.Script({Hang()});
  auto client = HttpClient::Create(*ParseHttpUrl(receiver.url()), {});
  ASSERT_TRUE(client.ok());
  absl::Time start = absl::Now();
  absl::StatusOr<HttpResponse> response =
      (*client)->Send(IngestLikeRequest(), absl::Milliseconds(300));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(PushErrorReasonOf(response.status()), PushErrorReason::kTimeout) << response.status();
  EXPECT_THAT(std::string(response.status().message()), HasSubstr("timed out"));
}

// libcurl's default, kept: http_proxy from the environment. The receiver
// plays the proxy and gets the request in absolute form.
TEST(HttpClientTest, ProxyComesFromTheEnvironment) {
  LoopbackReceiver proxy;
  ASSERT_EQ(setenv("http_proxy", absl::StrCat("http://127.0.0.1:", proxy.port()).c_str(), 1), 0);
  auto client = HttpClient::Create(*ParseHttpUrl("http://store.example:4040/pyro"), {});
  ASSERT_TRUE(client.ok());
  absl::StatusOr<HttpResponse> response = (*client)->Send(IngestLikeRequest(), absl::Seconds(5));
  unsetenv("http_proxy");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  ASSERT_EQ(proxy.requests().size(), 1u);
  EXPECT_EQ(proxy.requests()[0].path, "http://store.example:4040/pyro/ingest");
  EXPECT_EQ(proxy.requests()[0].headers.at("host"), "store.example:4040");
}

TEST(PyroscopePusherTest, BasicAuthTenantAndHeadersReachTheStore) {
  LoopbackReceiver receiver;
  PyroscopePushOptions options = FastOptions(receiver.url());
  options.client.credentials.basic_username = "alice";
  options.client.credentials.basic_password = "s3cret-pw";
  options.tenant_id = "team-a";
  options.headers = {{"X-Api-Key", "key-1"}};
  auto pusher = PyroscopePusher::Create(options);
  ASSERT_TRUE(pusher.ok()) << pusher.status();
  ASSERT_TRUE((*pusher)->Push(TestProfile(), absl::Now() - absl::Seconds(60), absl::Now()).ok());
  ASSERT_TRUE(Eventually([&] { return (*pusher)->Stats().sent == 1; }));
  ReceivedRequest request = receiver.requests().at(0);
  EXPECT_EQ(request.headers.at("authorization"), "Basic YWxpY2U6czNjcmV0LXB3");  // alice:s3cret-pw
  EXPECT_EQ(request.headers.at("x-scope-orgid"), "team-a");
  EXPECT_EQ(request.headers.at("x-api-key"), "key-1");
  EXPECT_EQ(request.headers.at("user-agent"), "pystrobe");
  pb::Profile decoded;
  EXPECT_TRUE(decoded.ParseFromString(Gunzip(FormField(request, "profile"))));
}

TEST(PyroscopePusherTest, BearerTokenIsSentAsAuthorization) {
  LoopbackReceiver receiver;
  PyroscopePushOptions options = FastOptions(receiver.url());
  options.client.credentials.bearer_token = "tok-123";
  auto pusher = PyroscopePusher::Create(options);
  ASSERT_TRUE(pusher.ok()) << pusher.status();
  ASSERT_TRUE((*pusher)->Push(TestProfile(), absl::Now() - absl::Seconds(60), absl::Now()).ok());
  ASSERT_TRUE(Eventually([&] { return (*pusher)->Stats().sent == 1; }));
  EXPECT_EQ(receiver.requests().at(0).headers.at("authorization"), "Bearer tok-123");
}

TEST(PyroscopePusherTest, RejectionNamesTheUrlAndStatusAndIsCounted) {
  LoopbackReceiver receiver;
  receiver.Script({Status(401)});
  auto pusher = PyroscopePusher::Create(FastOptions(receiver.url()));
  ASSERT_TRUE(pusher.ok());
  ASSERT_TRUE((*pusher)->Push(TestProfile(), absl::Now() - absl::Seconds(60), absl::Now()).ok());
  ASSERT_TRUE(Eventually([&] { return (*pusher)->Stats().rejected == 1; }));
  PushStats stats = (*pusher)->Stats();
  EXPECT_THAT(stats.last_error,
              StartsWith(absl::StrCat("POST ", receiver.url(), "/ingest: HTTP 401")));
  EXPECT_EQ(stats.errors[static_cast<size_t>(PushErrorReason::kHttpStatus)], 1u);
}

TEST(PyroscopePusherTest, SendsWhatPyroscopeReads) {
  LoopbackReceiver receiver;
  auto pusher = PyroscopePusher::Create(FastOptions(receiver.url()));
  ASSERT_TRUE(pusher.ok()) << pusher.status();
  ASSERT_TRUE((*pusher)
                  ->Push(TestProfile(), absl::FromUnixSeconds(1700000000),
                         absl::FromUnixSeconds(1700000060))
                  .ok());
  ASSERT_TRUE(Eventually([&] { return (*pusher)->Stats().sent == 1; }));
  (*pusher)->Shutdown(absl::Now() + absl::Seconds(1));

  std::vector<ReceivedRequest> requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u);
  const ReceivedRequest& request = requests[0];
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(request.path, "/pyro/ingest");
  EXPECT_EQ(request.query.at("name"), "pystrobe{cluster=prod-eu,role=web}");
  EXPECT_EQ(request.query.at("from"), "1700000000");
  EXPECT_EQ(request.query.at("until"), "1700000060");
  EXPECT_EQ(request.query.at("sampleRate"), "19");
  EXPECT_EQ(request.query.at("spyName"), "pystrobe");
  // With format=pprof the server would read the body as a bare profile.
  EXPECT_EQ(request.query.count("format"), 0u);
  EXPECT_EQ(request.headers.at("host"), absl::StrCat("127.0.0.1:", receiver.port()));

  std::string profile_gz = FormField(request, "profile");
  ASSERT_GE(profile_gz.size(), 2u);
  EXPECT_EQ(profile_gz.substr(0, 2), "\x1f\x8b");  // gzip, as the server sniffs
  pb::Profile decoded;
  ASSERT_TRUE(decoded.ParseFromString(Gunzip(profile_gz)));
  ASSERT_GE(decoded.sample_type_size(), 1);
  EXPECT_EQ(decoded.string_table(decoded.sample_type(0).type()), "samples");
  int64_t samples = 0;
  for (const pb::Sample& sample : decoded.sample()) samples += sample.value(0);
  EXPECT_EQ(samples, 7);
  std::vector<std::string> functions;
  for (const pb::Function& function : decoded.function()) {
    functions.push_back(decoded.string_table(function.name()));
  }
  EXPECT_THAT(functions, Contains("work"));
  EXPECT_THAT(functions, Contains("idle"));

  PushStats stats = (*pusher)->Stats();
  EXPECT_EQ(stats.enqueued, 1u);
  EXPECT_EQ(stats.retried, 0u);
  EXPECT_EQ(stats.bytes_sent, request.body.size());
}

TEST(PyroscopePusherTest, RawPprofEncodingSendsTheProfileAsBody) {
  LoopbackReceiver receiver;
  PyroscopePushOptions options = FastOptions(receiver.url());
  options.encoding = PushBodyEncoding::kRawPprof;
  auto pusher = PyroscopePusher::Create(options);
  ASSERT_TRUE(pusher.ok());
  ASSERT_TRUE((*pusher)->Push(TestProfile(), absl::Now() - absl::Seconds(60), absl::Now()).ok());
  ASSERT_TRUE(Eventually([&] { return (*pusher)->Stats().sent == 1; }));
  ReceivedRequest request = receiver.requests().at(0);
  EXPECT_EQ(request.query.at("format"), "pprof");
  EXPECT_EQ(request.headers.at("content-type"), "application/octet-stream");
  pb::Profile decoded;
  EXPECT_TRUE(decoded.ParseFromString(Gunzip(request.body)));
}

TEST(PyroscopePusherTest, Retries503Then200) {
  LoopbackReceiver receiver;
  receiver.Script({Status(503), Status(429, "Retry-After: 0\r\n"), Status(200)});
  auto pusher = PyroscopePusher::Create(FastOptions(receiver.url()));
  ASSERT_TRUE(pusher.ok());
  ASSERT_TRUE((*pusher)->Push(TestProfile(), absl::Now() - absl::Seconds(60), absl::Now()).ok());
  ASSERT_TRUE(Eventually([&] { return (*pusher)->Stats().sent == 1; }));
  PushStats stats = (*pusher)->Stats();
  EXPECT_EQ(stats.retried, 2u);
  EXPECT_EQ(stats.rejected, 0u);
  EXPECT_EQ(stats.failed, 0u);
  EXPECT_EQ(stats.errors[static_cast<size_t>(PushErrorReason::kHttpStatus)], 2u);
  EXPECT_EQ(receiver.requests().size(), 3u);
  // Each attempt is the same window.
  EXPECT_EQ(FormField(receiver.requests()[0], "profile"),
            FormField(receiver.requests()[2], "profile"));
}

TEST(PyroscopePusherTest, HonoursRetryAfter) {
  LoopbackReceiver receiver;
  receiver.Script({Status(503, "Retry-After: 1\r\n")});
  auto pusher = PyroscopePusher::Create(FastOptions(receiver.url()));
  ASSERT_TRUE(pusher.ok());
  absl::Time start = absl::Now();
  ASSERT_TRUE((*pusher)->Push(TestProfile(), start - absl::Seconds(60), start).ok());
  ASSERT_TRUE(Eventually([&] { return (*pusher)->Stats().sent == 1; }));
  EXPECT_GE(absl::Now() - start, absl::Seconds(1));  // not the 10 ms backoff
}

TEST(PyroscopePusherTest, RejectedOn400WithoutRetry) {
  LoopbackReceiver receiver;
  receiver.Script({Status(400)});
  auto pusher = PyroscopePusher::Create(FastOptions(receiver.url()));
  ASSERT_TRUE(pusher.ok());
  ASSERT_TRUE((*pusher)->Push(TestProfile(), absl::Now() - absl::Seconds(60), absl::Now()).ok());
  ASSERT_TRUE(Eventually([&] { return (*pusher)->Stats().rejected == 1; }));
  absl::SleepFor(absl::Milliseconds(100));  // time for a retry that must not come
  PushStats stats = (*pusher)->Stats();
  EXPECT_EQ(stats.sent, 0u);
  EXPECT_EQ(stats.retried, 0u);
  EXPECT_THAT(stats.last_error, HasSubstr("HTTP 400"));
  EXPECT_EQ(receiver.requests().size(), 1u);
}

TEST(PyroscopePusherTest, FailedAfterMaxAttempts) {
  LoopbackReceiver receiver;
  receiver.Script({Status(500), Status(502), Status(503), Status(200)});
  PyroscopePushOptions options = FastOptions(receiver.url());
  options.policy.max_attempts = 3;
  auto pusher = PyroscopePusher::Create(options);
  ASSERT_TRUE(pusher.ok());
  ASSERT_TRUE((*pusher)->Push(TestProfile(), absl::Now() - absl::Seconds(60), absl::Now()).ok());
  ASSERT_TRUE(Eventually([&] { return (*pusher)->Stats().failed == 1; }));
  PushStats stats = (*pusher)->Stats();
  EXPECT_EQ(stats.retried, 2u);
  EXPECT_EQ(stats.sent, 0u);
  EXPECT_EQ(receiver.requests().size(), 3u);
}

// Nobody listens: connections are refused, the worker keeps retrying its
// window, and the queue holds max_queue windows, dropping the oldest.
TEST(PyroscopePusherTest, DeadReceiverBoundsTheQueueAndCountsDrops) {
  PyroscopePushOptions options = FastOptions(absl::StrCat("http://127.0.0.1:", ClosedPort()));
  options.policy.max_queue = 3;
  options.policy.max_attempts = 1000;
  auto pusher = PyroscopePusher::Create(options);
  ASSERT_TRUE(pusher.ok());
  ASSERT_TRUE((*pusher)->Push(TestProfile(), absl::Now() - absl::Seconds(60), absl::Now()).ok());
  // The worker takes the first window and retries it.
  ASSERT_TRUE(Eventually([&] { return (*pusher)->Stats().retried >= 2; }));
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE((*pusher)->Push(TestProfile(), absl::Now() - absl::Seconds(60), absl::Now()).ok());
  }
  PushStats stats = (*pusher)->Stats();
  EXPECT_EQ(stats.enqueued, 10u);
  EXPECT_EQ(stats.queued, 4u);  // 3 waiting + 1 being retried
  EXPECT_EQ(stats.dropped_queue_full, 6u);
  EXPECT_THAT(stats.last_error, HasSubstr("refused"));
  EXPECT_GE(stats.errors[static_cast<size_t>(PushErrorReason::kConnect)], 2u);
  EXPECT_EQ(Accounted(stats), stats.enqueued);

  absl::Time start = absl::Now();
  (*pusher)->Shutdown(absl::Now() + absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  stats = (*pusher)->Stats();
  EXPECT_EQ(stats.queued, 0u);
  EXPECT_EQ(stats.dropped_shutdown, 4u);
  EXPECT_EQ(Accounted(stats), stats.enqueued);
  EXPECT_EQ((*pusher)->Push(TestProfile(), absl::Now(), absl::Now()).code(),
            absl::StatusCode::kFailedPrecondition);
}

// A receiver that reads the request and never answers: each attempt times
// out, and Shutdown cuts the request in flight to its deadline.
TEST(PyroscopePusherTest, SlowReceiverTimesOutAndShutdownKeepsItsDeadline) {
  LoopbackReceiver receiver;
  receiver.Script({Hang()});
  PyroscopePushOptions options = FastOptions(receiver.url());
  options.policy.timeout = absl::Milliseconds(300);
  options.policy.max_attempts = 2;
  auto pusher = PyroscopePusher::Create(options);
  ASSERT_TRUE(pusher.ok());
  ASSERT_TRUE((*pusher)->Push(TestProfile(), absl::Now() - absl::Seconds(60), absl::Now()).ok());
  ASSERT_TRUE(Eventually([&] { return (*pusher)->Stats().sent == 1; }));
  PushStats stats = (*pusher)->Stats();
  EXPECT_EQ(stats.retried, 1u);
  EXPECT_EQ(stats.sent, 1u);

  // Now a request that hangs with a long timeout, cut by Shutdown.
  receiver.Script({Hang()});
  ASSERT_TRUE((*pusher)->Push(TestProfile(), absl::Now() - absl::Seconds(60), absl::Now()).ok());
  ASSERT_TRUE(Eventually([&] { return receiver.requests().size() == 3; }));
  absl::Time start = absl::Now();
  (*pusher)->Shutdown(absl::Now() + absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(1000));
  stats = (*pusher)->Stats();
  EXPECT_EQ(stats.dropped_shutdown, 1u);
  EXPECT_EQ(Accounted(stats), stats.enqueued);
}

TEST(PyroscopePusherTest, ShutdownFlushesTheQueueWithinTheDeadline) {
  LoopbackReceiver receiver;
  auto pusher = PyroscopePusher::Create(FastOptions(receiver.url()));
  ASSERT_TRUE(pusher.ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*pusher)->Push(TestProfile(), absl::Now() - absl::Seconds(60), absl::Now()).ok());
  }
  (*pusher)->Shutdown(absl::Now() + absl::Seconds(5));
  PushStats stats = (*pusher)->Stats();
  EXPECT_EQ(stats.sent, 5u);
  EXPECT_EQ(stats.dropped_shutdown, 0u);
  EXPECT_EQ(receiver.requests().size(), 5u);
}

TEST(IngestRequestTest, ResidentGrowthIsItsOwnTypeInBytesWithItsSampleTypeConfig) {
  PyroscopePushOptions options = Options("http://store");
  options.labels.clear();
  HttpRequest request =
      BuildIngestRequest(options, *ParseHttpUrl(options.url), "GZ", absl::FromUnixSeconds(5),
                         absl::FromUnixSeconds(6), 0, "B", /*resident_growth=*/true);
  EXPECT_EQ(request.target,
            "/ingest?name=pystrobe.resident_growth%7B%7D&from=5&until=6&spyName=pystrobe"
            "&units=bytes&aggregationType=sum");
  EXPECT_THAT(request.body,
              testing::HasSubstr("Content-Disposition: form-data; name=\"sample_type_config\""));
  EXPECT_THAT(request.body,
              testing::HasSubstr("{\"resident_growth\":{\"units\":\"bytes\",\"aggregation\":"
                                 "\"sum\",\"display-name\":\"resident_growth_bytes\"}}"
                                 "\r\n--B--\r\n"));
}

}  // namespace
}  // namespace pystrobe

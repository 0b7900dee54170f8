// The daemon's HTTP server on a real loopback port: /metrics in Prometheus'
// text format, the pages it is given, and nothing that writes.
#include "daemon/service/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>

#include "daemon/service/metrics_snapshot.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A port free now on 127.0.0.1 (the kernel's pick).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  bind(fd, reinterpret_cast<sockaddr*>(&address), size);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  close(fd);
  return ntohs(address.sin_port);
}

// The whole response to one request (HTTP/1.0: the server answers in it and
// closes after).
std::string Request(int port, const std::string& method, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return "";
  }
  std::string request = method + " " + path + " HTTP/1.0\r\nContent-Length: 0\r\n\r\n";
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, n);
  close(fd);
  return response;
}

class OnePage : public HttpPages {
 public:
  std::optional<PageResponse> Get(std::string_view path, std::string_view query) const override {
    if (path != "/") return std::nullopt;
    PageResponse response;
    response.body = "<p>query=" + std::string(query) + "</p>";
    return response;
  }
};

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto snapshot = std::make_shared<MetricsSnapshot>();
    prometheus::MetricFamily family = GaugeFamily("pystrobe_test_value", "a test value");
    AddSample(family, 42);
    snapshot->Publish("test", {family});
    port_ = FreePort();
    absl::StatusOr<std::unique_ptr<MetricsServer>> server = MetricsServer::Start(
        "127.0.0.1:" + std::to_string(port_), snapshot, std::make_shared<OnePage>());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  int port_ = 0;
  std::unique_ptr<MetricsServer> server_;
};

TEST_F(MetricsServerTest, ServesMetricsInPrometheusTextFormat) {
  std::string response = Request(port_, "GET", "/metrics");
  EXPECT_THAT(response, StartsWith("HTTP/1.0 200"));
  EXPECT_THAT(response, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(response, HasSubstr("pystrobe_test_value 42"));
}

TEST_F(MetricsServerTest, ServesItsPagesAndSaysWhatIsNotThere) {
  std::string page = Request(port_, "GET", "/?window=3");
  EXPECT_THAT(page, StartsWith("HTTP/1.0 200"));
  EXPECT_THAT(page, HasSubstr("text/html"));
  EXPECT_THAT(page, HasSubstr("<p>query=window=3</p>"));
  EXPECT_THAT(Request(port_, "GET", "/nothing"), StartsWith("HTTP/1.0 404"));
}

TEST_F(MetricsServerTest, WritesAreRefused) {
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH"}) {
    EXPECT_THAT(Request(port_, method, "/metrics"), StartsWith("HTTP/1.0 405")) << method;
    EXPECT_THAT(Request(port_, method, "/"), StartsWith("HTTP/1.0 405")) << method;
  }
}

TEST(MetricsServerStartTest, ABusyPortIsAnErrorNamingIt) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  std::string listen_at = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start(listen_at, std::make_shared<MetricsSnapshot>());
  close(fd);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr(listen_at));
}

}  // namespace
}  // namespace pystrobe

// systemd's notification protocol against a real AF_UNIX datagram socket,
// bound at a path and in the abstract namespace, as systemd binds it.
#include "daemon/service/sd_notify.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// A datagram socket standing in for systemd's $NOTIFY_SOCKET.
class NotifyListener {
 public:
  // `abstract`: bind "\0name" and name it "@name", as systemd does.
  explicit NotifyListener(bool abstract) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::string name = absl::StrCat("pystrobe-notify-test-", getpid(), abstract ? "-a" : "-p");
    socklen_t length;
    if (abstract) {
      address_ = "@" + name;
      std::memcpy(sun.sun_path + 1, name.data(), name.size());
      length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    } else {
      address_ = absl::StrCat(testing::TempDir(), "/", name);
      unlink(address_.c_str());
      std::memcpy(sun.sun_path, address_.data(), address_.size());
      length = sizeof(sun);
    }
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&sun), length), 0) << strerror(errno);
    timeval timeout{.tv_sec = 2, .tv_usec = 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~NotifyListener() {
    close(fd_);
    if (address_[0] == '/') unlink(address_.c_str());
  }
  const std::string& address() const { return address_; }

  std::optional<std::string> Receive() {
    char buffer[4096];
    ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    if (n < 0) return std::nullopt;
    return std::string(buffer, static_cast<size_t>(n));
  }

 private:
  int fd_ = -1;
  std::string address_;
};

class SdNotifyTest : public testing::Test {
 protected:
  void TearDown() override {
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
  }
};

TEST_F(SdNotifyTest, EveryMessageReachesAPathSocket) {
  NotifyListener listener(/*abstract=*/false);
  setenv("NOTIFY_SOCKET", listener.address().c_str(), 1);
  ASSERT_TRUE(NotifyReady().ok());
  EXPECT_EQ(listener.Receive(), "READY=1");
  ASSERT_TRUE(NotifyReady("sampling at 19 Hz").ok());
  EXPECT_EQ(listener.Receive(), "READY=1\nSTATUS=sampling at 19 Hz");
  ASSERT_TRUE(NotifyWatchdog().ok());
  EXPECT_EQ(listener.Receive(), "WATCHDOG=1");
  ASSERT_TRUE(NotifyReloading().ok());
  std::optional<std::string> reloading = listener.Receive();
  ASSERT_TRUE(reloading.has_value());
  EXPECT_THAT(*reloading, MatchesRegex("RELOADING=1\nMONOTONIC_USEC=[0-9]+"));
  ASSERT_TRUE(NotifyStopping().ok());
  EXPECT_EQ(listener.Receive(), "STOPPING=1");
}

TEST_F(SdNotifyTest, AbstractSocketNamedWithAt) {
  NotifyListener listener(/*abstract=*/true);
  setenv("NOTIFY_SOCKET", listener.address().c_str(), 1);
  ASSERT_TRUE(NotifyReady().ok());
  EXPECT_EQ(listener.Receive(), "READY=1");
}

TEST_F(SdNotifyTest, NoSocketOutsideSystemdIsANoOp) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(NotifyReady().ok());
  EXPECT_TRUE(NotifyWatchdog().ok());
  setenv("NOTIFY_SOCKET", "", 1);
  EXPECT_TRUE(NotifyStopping().ok());
}

TEST_F(SdNotifyTest, ErrorsNameTheSocket) {
  setenv("NOTIFY_SOCKET", "/nonexistent/pystrobe/notify", 1);
  absl::Status status = NotifyReady();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr("/nonexistent/pystrobe/notify"));
  setenv("NOTIFY_SOCKET", "relative", 1);
  EXPECT_EQ(NotifyReady().code(), absl::StatusCode::kInvalidArgument);
  setenv("NOTIFY_SOCKET", ("/" + std::string(200, 'x')).c_str(), 1);
  EXPECT_EQ(NotifyReady().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SdNotifyTest, WatchdogIntervalFromEnvironment) {
  EXPECT_EQ(WatchdogInterval(), std::nullopt);
  setenv("WATCHDOG_USEC", "30000000", 1);
  EXPECT_EQ(WatchdogInterval(), absl::Seconds(30));
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  EXPECT_EQ(WatchdogInterval(), absl::Seconds(30));
  setenv("WATCHDOG_PID", std::to_string(getpid() + 1).c_str(), 1);  // meant for another process
  EXPECT_EQ(WatchdogInterval(), std::nullopt);
  unsetenv("WATCHDOG_PID");
  setenv("WATCHDOG_USEC", "0", 1);
  EXPECT_EQ(WatchdogInterval(), std::nullopt);
  setenv("WATCHDOG_USEC", "soon", 1);
  EXPECT_EQ(WatchdogInterval(), std::nullopt);
}

}  // namespace
}  // namespace pystrobe

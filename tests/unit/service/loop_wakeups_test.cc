#include "daemon/service/loop_wakeups.h"

#include <signal.h>
#include <unistd.h>

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

// How long a Wait took, in the loop's terms.
absl::Duration TimedWait(LoopWakeups& wakeups, absl::Duration timeout) {
  absl::Time start = absl::Now();
  wakeups.Wait(timeout);
  return absl::Now() - start;
}

TEST(LoopWakeupsTest, SleepsUntilItsTimerWhenNothingHappens) {
  auto wakeups = LoopWakeups::Create();
  ASSERT_TRUE(wakeups.ok()) << wakeups.status();
  EXPECT_GE(TimedWait(**wakeups, absl::Milliseconds(200)), absl::Milliseconds(190));
}

TEST(LoopWakeupsTest, AWakeFromAnotherThreadEndsTheWaitAtOnce) {
  auto wakeups = LoopWakeups::Create();
  ASSERT_TRUE(wakeups.ok()) << wakeups.status();
  std::thread waker([&] {
    absl::SleepFor(absl::Milliseconds(50));
    (*wakeups)->Wake();
  });
  EXPECT_LT(TimedWait(**wakeups, absl::Seconds(10)), absl::Seconds(5));
  waker.join();
  // The wake was taken: the next wait sleeps again.
  EXPECT_GE(TimedWait(**wakeups, absl::Milliseconds(100)), absl::Milliseconds(90));
}

TEST(LoopWakeupsTest, AWakeBeforeTheWaitIsNotLost) {
  auto wakeups = LoopWakeups::Create();
  ASSERT_TRUE(wakeups.ok()) << wakeups.status();
  (*wakeups)->Wake();
  (*wakeups)->Wake();
  EXPECT_LT(TimedWait(**wakeups, absl::Seconds(10)), absl::Seconds(5));
}

TEST(LoopWakeupsTest, AWatchedFdWakesItWhileReadable) {
  auto wakeups = LoopWakeups::Create();
  ASSERT_TRUE(wakeups.ok()) << wakeups.status();
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ASSERT_TRUE((*wakeups)->Watch(pipe_fds[0]).ok());
  ASSERT_EQ(write(pipe_fds[1], "x", 1), 1);
  EXPECT_LT(TimedWait(**wakeups, absl::Seconds(10)), absl::Seconds(5));
  // Unwatched, it no longer wakes the loop although still readable.
  ASSERT_TRUE((*wakeups)->Watch(-1).ok());
  EXPECT_GE(TimedWait(**wakeups, absl::Milliseconds(100)), absl::Milliseconds(90));
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

}  // namespace
}  // namespace pystrobe

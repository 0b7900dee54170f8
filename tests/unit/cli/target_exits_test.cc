// A recording pointed at processes ends when the last of them does, seen
// through pidfds without reading /proc.
#include "daemon/cli/target_exits.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

// A child that sleeps until killed.
pid_t StartSleeper() {
  pid_t pid = fork();
  if (pid == 0) {
    for (;;) pause();
  }
  return pid;
}

// Waits (a few seconds at most) for every target to be seen ending.
bool WaitForAllEnded(TargetExits& exits) {
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!exits.AllEnded() && absl::Now() < deadline) exits.Wait(-1, absl::Milliseconds(25));
  return exits.AllEnded();
}

TEST(TargetExitsTest, EndsOnlyWhenTheLastTargetHasExited) {
  pid_t first = StartSleeper();
  pid_t second = StartSleeper();
  ASSERT_GT(first, 0);
  ASSERT_GT(second, 0);
  TargetExits exits({static_cast<uint32_t>(first), static_cast<uint32_t>(second)});
  EXPECT_EQ(exits.fallback_count(), 0u);
  exits.Wait(-1, absl::Milliseconds(10));
  EXPECT_FALSE(exits.AllEnded());

  kill(first, SIGKILL);
  waitpid(first, nullptr, 0);
  exits.Wait(-1, absl::Milliseconds(100));
  EXPECT_FALSE(exits.AllEnded()) << "one target still runs";

  // A zombie not yet collected by its parent has ended too.
  kill(second, SIGKILL);
  EXPECT_TRUE(WaitForAllEnded(exits));
  waitpid(second, nullptr, 0);
}

TEST(TargetExitsTest, ATargetAlreadyGoneHasEnded) {
  pid_t gone = StartSleeper();
  ASSERT_GT(gone, 0);
  kill(gone, SIGKILL);
  waitpid(gone, nullptr, 0);
  TargetExits exits({static_cast<uint32_t>(gone)});
  exits.Wait(-1, absl::ZeroDuration());
  EXPECT_TRUE(exits.AllEnded());
}

TEST(TargetExitsTest, AReadableFdEndsTheWaitEarly) {
  pid_t target = StartSleeper();
  ASSERT_GT(target, 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  ASSERT_EQ(write(pipe_fds[1], "x", 1), 1);
  TargetExits exits({static_cast<uint32_t>(target)});
  absl::Time before = absl::Now();
  exits.Wait(pipe_fds[0], absl::Seconds(10));
  EXPECT_LT(absl::Now() - before, absl::Seconds(5));
  EXPECT_FALSE(exits.AllEnded());
  kill(target, SIGKILL);
  waitpid(target, nullptr, 0);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

TEST(TargetExitsTest, NoTargetsNeverEnds) {
  TargetExits exits({});
  exits.Wait(-1, absl::ZeroDuration());
  EXPECT_FALSE(exits.AllEnded());
}

}  // namespace
}  // namespace pystrobe

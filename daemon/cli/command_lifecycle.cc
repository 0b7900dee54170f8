#include "daemon/cli/command_lifecycle.h"

#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace pystrobe {
namespace {

std::atomic<int> stop_signal{0};

void OnStopSignal(int signal) { stop_signal.store(signal); }

}  // namespace

void StopSignals::Install() {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool StopSignals::Requested() { return stop_signal.load() != 0; }

void StopSignals::Request(int signal) { stop_signal.store(signal); }

void StopCommand(LaunchedCommand& command, absl::Duration grace) {
  if (command.TryReap()) return;
  kill(command.pid(), SIGTERM);
  absl::Time deadline = absl::Now() + grace;
  while (!command.TryReap() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  if (!command.TryReap()) {
    kill(command.pid(), SIGKILL);
    command.Wait();
  }
}

}  // namespace pystrobe

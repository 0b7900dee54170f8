#include "daemon/service/signals.h"

#include <signal.h>

#include "daemon/service/loop_wakeups.h"

namespace pystrobe {
namespace {

std::atomic<int> stop_signal{0};
std::atomic<bool> reload_requested{false};
std::atomic<const LoopWakeups*> signal_wakeups{nullptr};

void WakeLoop() {
  if (const LoopWakeups* wakeups = signal_wakeups.load()) wakeups->Wake();
}

void OnStopSignal(int signal) {
  stop_signal.store(signal);
  WakeLoop();
}

void OnReloadSignal(int) {
  reload_requested.store(true);
  WakeLoop();
}

}  // namespace

void Signals::Install(Reload reload) {
  struct sigaction action = {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = OnStopSignal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  if (reload == Reload::kOnSighup) {
    action.sa_handler = OnReloadSignal;
    sigaction(SIGHUP, &action, nullptr);
  }
  signal(SIGPIPE, SIG_IGN);
}

void Signals::RequestStop(int signal) {
  stop_signal.store(signal);
  WakeLoop();
}

const std::atomic<int>& Signals::stop_flag() { return stop_signal; }

bool Signals::TakeReloadRequest() { return reload_requested.exchange(false); }

void Signals::WakeOnSignal(const LoopWakeups* wakeups) { signal_wakeups.store(wakeups); }

}  // namespace pystrobe

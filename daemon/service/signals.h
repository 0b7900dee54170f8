// The one way pystrobe's commands and its daemon take signals: SIGINT and
// SIGTERM ask the command to stop (it writes what it collected first),
// SIGHUP asks the daemon to reload its configuration. A handler only stores
// the request and wakes whatever loop is waiting on it.
#ifndef PYSTROBE_DAEMON_SERVICE_SIGNALS_H_
#define PYSTROBE_DAEMON_SERVICE_SIGNALS_H_

#include <atomic>

namespace pystrobe {

class LoopWakeups;

class Signals {
 public:
  enum class Reload { kIgnore, kOnSighup };

  // Installs the handlers without SA_RESTART, so that a signal also ends a
  // wait in poll() or a sleep at once. Ignores SIGPIPE: a peer that went away
  // is an error on the write, not the end of pystrobe.
  static void Install(Reload reload = Reload::kIgnore);

  static bool StopRequested() { return StopSignal() != 0; }
  // The signal that asked for the stop, or 0.
  static int StopSignal() { return stop_flag().load(); }
  // Stops as that signal would (a 'q' typed in top, a reload that failed).
  static void RequestStop(int signal);
  // The flag itself, for code that polls it while it waits (the control client).
  static const std::atomic<int>& stop_flag();

  // True once for each SIGHUP received since the last call.
  static bool TakeReloadRequest();

  // A signal also wakes `wakeups` (nullptr: none), for a loop that sleeps in it.
  static void WakeOnSignal(const LoopWakeups* wakeups);
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_SIGNALS_H_

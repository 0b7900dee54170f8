// Single key presses on a terminal stdin, for `pystrobe top` (local or
// through the daemon).
#ifndef PYSTROBE_DAEMON_CLI_RAW_KEYS_H_
#define PYSTROBE_DAEMON_CLI_RAW_KEYS_H_

#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <optional>

namespace pystrobe {

// Puts a terminal stdin in non-canonical, no-echo mode for single keys, and
// restores it on destruction.
class RawKeys {
 public:
  RawKeys() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawKeys() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  // A key pressed, if any.
  std::optional<char> Read() {
    if (!active_) return std::nullopt;
    pollfd fd = {.fd = STDIN_FILENO, .events = POLLIN, .revents = 0};
    char key = 0;
    if (poll(&fd, 1, 0) == 1 && read(STDIN_FILENO, &key, 1) == 1) return key;
    return std::nullopt;
  }

 private:
  termios saved_ = {};
  bool active_ = false;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_RAW_KEYS_H_

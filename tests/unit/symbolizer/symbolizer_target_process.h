#ifndef PYSTROBE_TESTS_UNIT_SYMBOLIZER_TARGET_PROCESS_H_
#define PYSTROBE_TESTS_UNIT_SYMBOLIZER_TARGET_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace pystrobe {

// A child process that prints "key=0xaddress" lines, then "ready", then reads
// commands from stdin until EOF.
class TargetProcess {
 public:
  // Starts argv and reads its addresses; nullopt if it exits before "ready".
  static std::unique_ptr<TargetProcess> Start(const std::vector<std::string>& argv) {
    int to_child[2];
    int from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) return nullptr;
    pid_t pid = fork();
    if (pid < 0) return nullptr;
    if (pid == 0) {
      dup2(to_child[0], STDIN_FILENO);
      dup2(from_child[1], STDOUT_FILENO);
      std::vector<char*> args;
      for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    auto process = std::unique_ptr<TargetProcess>(
        new TargetProcess(pid, to_child[1], fdopen(from_child[0], "r")));
    for (std::optional<std::string> line; (line = process->ReadLine()) && *line != "ready";) {
      std::pair<std::string, std::string> kv = absl::StrSplit(*line, absl::MaxSplits('=', 1));
      uint64_t value = 0;
      if (absl::SimpleHexAtoi(kv.second, &value)) process->addresses_[kv.first] = value;
    }
    if (process->addresses_.empty()) return nullptr;
    return process;
  }

  ~TargetProcess() {
    close(stdin_fd_);
    fclose(stdout_);
    if (running_) KillAndReap();
  }

  uint32_t pid() const { return static_cast<uint32_t>(pid_); }
  uint64_t address(const std::string& key) const {
    auto it = addresses_.find(key);
    return it == addresses_.end() ? 0 : it->second;
  }

  // Sends one command and reads "key=0xaddress" back.
  uint64_t Request(const std::string& command, const std::string& key) {
    std::string line = command + "\n";
    if (write(stdin_fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return 0;
    std::optional<std::string> reply = ReadLine();
    std::string prefix = key + "=";
    uint64_t value = 0;
    if (!reply || reply->rfind(prefix, 0) != 0 ||
        !absl::SimpleHexAtoi(reply->substr(prefix.size()), &value)) {
      return 0;
    }
    return value;
  }

  // After this the pid is gone from /proc.
  void KillAndReap() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    running_ = false;
  }

 private:
  TargetProcess(pid_t pid, int stdin_fd, FILE* stdout_file)
      : pid_(pid), stdin_fd_(stdin_fd), stdout_(stdout_file) {}

  std::optional<std::string> ReadLine() {
    char* line = nullptr;
    size_t capacity = 0;
    ssize_t n = getline(&line, &capacity, stdout_);
    std::optional<std::string> result;
    if (n > 0) result = std::string(line, line[n - 1] == '\n' ? n - 1 : n);
    free(line);
    return result;
  }

  pid_t pid_;
  int stdin_fd_;
  FILE* stdout_;
  bool running_ = true;
  std::map<std::string, uint64_t> addresses_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_TESTS_UNIT_SYMBOLIZER_TARGET_PROCESS_H_

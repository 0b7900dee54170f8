// Shared by the python_*_test.cc unit tests: the CPython interpreters this
// machine has, and small process helpers.
#ifndef PYSTROBE_TESTS_UNIT_PYTHON_TEST_SUPPORT_H_
#define PYSTROBE_TESTS_UNIT_PYTHON_TEST_SUPPORT_H_

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace pystrobe::testing {

struct InstalledPython {
  std::string label;                      // "pyenv 3.9.18" or "debian 3.11"
  int minor = 0;                          // 3.<minor>
  std::string executable;                 // absolute path
  std::vector<std::string> include_dirs;  // for Python.h and internal/
};

inline bool IsExecutable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && (st.st_mode & S_IXUSR);
}

// Debian's /usr/bin/python3.11 and every pyenv 3.8 to 3.13; prints the ones
// that are missing so a run says what it did not cover.
inline std::vector<InstalledPython> InstalledPythons() {
  std::vector<InstalledPython> found;
  std::vector<std::string> missing;
  if (IsExecutable("/usr/bin/python3.11")) {
    found.push_back({"debian 3.11",
                     11,
                     "/usr/bin/python3.11",
                     {"/usr/include/python3.11", "/usr/include/x86_64-linux-gnu/python3.11"}});
  } else {
    missing.push_back("debian /usr/bin/python3.11");
  }
  const char* env_root = std::getenv("PYENV_ROOT");
  const std::string root = env_root != nullptr ? env_root : "/root/.pyenv";
  for (int minor = 8; minor <= 13; ++minor) {
    const std::string prefix = "3." + std::to_string(minor) + ".";
    std::string best;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(root + "/versions", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(prefix, 0) == 0 && name > best) best = name;
    }
    const std::string exe = root + "/versions/" + best + "/bin/python3." + std::to_string(minor);
    if (best.empty() || !IsExecutable(exe)) {
      missing.push_back("pyenv 3." + std::to_string(minor));
      continue;
    }
    const std::string include =
        root + "/versions/" + best + "/include/python3." + std::to_string(minor);
    found.push_back({"pyenv " + best, minor, exe, {include}});
  }
  for (const std::string& name : missing) {
    std::cout << "[ SKIPPED  ] CPython not installed: " << name << "\n";
  }
  return found;
}

// Runs `command` through the shell and returns its stdout; `status` gets the exit status.
inline std::string RunCommand(const std::string& command, int* status) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *status = -1;
    return output;
  }
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  *status = pclose(pipe);
  return output;
}

}  // namespace pystrobe::testing

#endif  // PYSTROBE_TESTS_UNIT_PYTHON_TEST_SUPPORT_H_

// Shared by the python_*_test.cc unit tests: the CPython interpreters this
// machine has, and small process helpers.
#ifndef PYSTROBE_TESTS_UNIT_PYTHON_TEST_SUPPORT_H_
#define PYSTROBE_TESTS_UNIT_PYTHON_TEST_SUPPORT_H_

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace pystrobe::testing {

struct InstalledPython {
  std::string label;                      // "pyenv 3.9.18" or "debian 3.11"
  int minor = 0;                          // <major>.<minor>
  std::string executable;                 // absolute path
  std::vector<std::string> include_dirs;  // for Python.h and internal/
  int major = 3;
  std::string compile_flags = "";  // more flags for cc, e.g. where a chroot's headers are
  bool free_threaded = false;
};

// Where scripts/test-pythons.sh puts the newest CPythons: a Debian unstable
// chroot (run through launchers in bin/) and free-threaded builds.
inline constexpr char kTestPythonsRoot[] = "/opt/pystrobe-test";

inline bool IsExecutable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && (st.st_mode & S_IXUSR);
}

// Which interpreters a test covers: 3.8 to 3.13, or 2.7, 3.6 and 3.7 too
// (for tests whose workloads and checks hold for the older ones).
enum class PythonSet { kModern, kWithOld };

// The latest pyenv <prefix>* installation under `root`, or "".
inline std::string LatestPyenvVersion(const std::string& root, const std::string& prefix) {
  std::string best;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root + "/versions", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name > best) best = name;
  }
  return best;
}

// Debian's /usr/bin/python3.11, every pyenv 3.8 to 3.13 (and 2.7, 3.6,
// 3.7 with PythonSet::kWithOld), Debian unstable's 3.14 and 3.15 and the
// free-threaded 3.14t and 3.15t of scripts/test-pythons.sh; prints the ones
// that are missing so a run says what it did not cover.
// The free-threaded builds only with `with_free_threaded`: what reads their
// objects (asyncio, sys.modules) does not support them yet.
inline std::vector<InstalledPython> InstalledPythons(PythonSet set = PythonSet::kModern,
                                                     bool with_free_threaded = false) {
  std::vector<InstalledPython> found;
  std::vector<std::string> missing;
  if (IsExecutable("/usr/bin/python3.11")) {
    found.push_back({"debian 3.11",
                     11,
                     "/usr/bin/python3.11",
                     {"/usr/include/python3.11", "/usr/include/x86_64-linux-gnu/python3.11"},
                     3,
                     "",
                     false});
  } else {
    missing.push_back("debian /usr/bin/python3.11");
  }
  const char* env_root = std::getenv("PYENV_ROOT");
  const std::string root = env_root != nullptr ? env_root : "/root/.pyenv";
  std::vector<std::pair<int, int>> versions;
  if (set == PythonSet::kWithOld) versions = {{2, 7}, {3, 6}, {3, 7}};
  for (int minor = 8; minor <= 13; ++minor) versions.emplace_back(3, minor);
  for (const auto& [major, minor] : versions) {
    const std::string short_version = std::to_string(major) + "." + std::to_string(minor);
    const std::string best = LatestPyenvVersion(root, short_version + ".");
    const std::string exe = root + "/versions/" + best + "/bin/python" + short_version;
    if (best.empty() || !IsExecutable(exe)) {
      missing.push_back("pyenv " + short_version);
      continue;
    }
    // 3.6 and 3.7 name their headers' folder with the ABI flag "m".
    const std::string abi = major == 3 && minor < 8 ? "m" : "";
    const std::string include =
        root + "/versions/" + best + "/include/python" + short_version + abi;
    found.push_back({"pyenv " + best, minor, exe, {include}, major, "", false});
  }
  const std::string test_root = kTestPythonsRoot;
  const std::string sid = test_root + "/sid";
  for (int minor = 13; minor <= 15; ++minor) {
    const std::string short_version = "3." + std::to_string(minor);
    const std::string launcher = test_root + "/bin/python" + short_version;
    // 3.13 is pyenv's; only its free-threaded build comes from here.
    const bool from_sid = minor >= 14;
    if (from_sid &&
        (!IsExecutable(launcher) || !IsExecutable(sid + "/usr/bin/python" + short_version))) {
      missing.push_back("sid " + short_version + " (run scripts/test-pythons.sh)");
    } else if (from_sid) {
      found.push_back({"sid " + short_version,
                       minor,
                       launcher,
                       {sid + "/usr/include/python" + short_version},
                       3,
                       // <x86_64-linux-gnu/python3.X/pyconfig.h>, after our own libc's headers
                       "-idirafter " + sid + "/usr/include",
                       false});
    }
    const std::string free_threaded = test_root + "/" + short_version + "t";
    const std::string exe = free_threaded + "/bin/python" + short_version + "t";
    if (!with_free_threaded) continue;
    if (!IsExecutable(exe)) {
      missing.push_back("free-threaded " + short_version + "t (run scripts/test-pythons.sh)");
    } else {
      found.push_back({short_version + "t",
                       minor,
                       exe,
                       {free_threaded + "/include/python" + short_version + "t"},
                       3,
                       "",
                       true});
    }
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

// "name=value" lines (print_offsets.c's output) as a map.
inline std::map<std::string, uint64_t> ParseOffsetLines(const std::string& text) {
  std::map<std::string, uint64_t> values;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    values[line.substr(0, eq)] = std::stoull(line.substr(eq + 1));
  }
  return values;
}

// tests/workloads/python/print_offsets.c built against `python`'s headers
// (with `defines`, e.g. -DPy_GIL_DISABLED) and run with `argument`: its
// output; "" with a printed reason when it cannot be built or run.
inline std::string PrintOffsets(const InstalledPython& python, const std::string& defines,
                                const std::string& argument) {
  // Named for this process: ctest runs tests that build it side by side.
  const std::string binary =
      std::string(::testing::TempDir()) + "/pystrobe_print_offsets." + std::to_string(getpid());
  std::string command = "cc -DPy_BUILD_CORE " + defines + " -o " + binary +
                        " " PYSTROBE_SOURCE_DIR "/tests/workloads/python/print_offsets.c";
  for (const std::string& dir : python.include_dirs) {
    command += " -I" + dir + " -I" + dir + "/internal";
  }
  command += " " + python.compile_flags;
  int status = 0;
  const std::string compile_output = RunCommand(command + " 2>&1", &status);
  if (status != 0) {
    std::cout << command << "\n" << compile_output;
    return "";
  }
  const std::string output = RunCommand(binary + " " + argument, &status);
  return status == 0 ? output : "";
}

}  // namespace pystrobe::testing

#endif  // PYSTROBE_TESTS_UNIT_PYTHON_TEST_SUPPORT_H_

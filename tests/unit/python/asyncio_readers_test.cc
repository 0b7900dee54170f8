// The readers behind `pystrobe dump --asyncio`, against every installed
// CPython: the object layout table against each version's headers and live
// _asyncio tasks, and the object reader against real objects of a live
// process (dicts, sets, lists, tuples, weakrefs, instance attributes).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daemon/python/interpreter_finder.h"
#include "daemon/python/object_layout.h"
#include "daemon/python/object_reader.h"
#include "daemon/python/process_memory.h"
#include "tests/unit/python/python_test_support.h"

namespace pystrobe {
namespace {

using testing::InstalledPython;
using testing::InstalledPythons;
using testing::RunCommand;

std::map<std::string, uint64_t> ParseLines(const std::string& text) {
  std::map<std::string, uint64_t> values;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits('=', 1));
    uint64_t value = 0;
    if (parts.size() == 2 && absl::SimpleAtoi(parts[1], &value)) values[parts[0]] = value;
  }
  return values;
}

// A child whose stdout is read up to "ready"; killed on destruction.
class ReadyChild {
 public:
  explicit ReadyChild(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      std::vector<char*> args;
      for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    FILE* out = fdopen(fds[0], "r");
    char buffer[4096];
    while (out != nullptr && fgets(buffer, sizeof(buffer), out) != nullptr) {
      std::string line(buffer);
      if (!line.empty() && line.back() == '\n') line.pop_back();
      if (line == "ready") break;
      output_ += line + "\n";
    }
    if (out != nullptr) fclose(out);
  }
  ~ReadyChild() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  std::string output_;
};

TEST(ObjectLayoutTest, TableMatchesTheHeadersOfEveryInstalledVersion) {
  const std::vector<InstalledPython> pythons = InstalledPythons();
  ASSERT_FALSE(pythons.empty());
  const std::string binary = ::testing::TempDir() + "/pystrobe_print_object_offsets";
  for (const InstalledPython& python : pythons) {
    SCOPED_TRACE(python.label);
    std::string command = "cc -DPy_BUILD_CORE -o " + binary +
                          " " PYSTROBE_SOURCE_DIR "/tests/workloads/python/print_object_offsets.c";
    for (const std::string& dir : python.include_dirs) command += " -I" + dir;
    command += " " + python.compile_flags;
    int status = 0;
    const std::string compile_output = RunCommand(command + " 2>&1", &status);
    ASSERT_EQ(status, 0) << command << "\n" << compile_output;
    const std::map<std::string, uint64_t> expected = ParseLines(RunCommand(binary, &status));
    ASSERT_EQ(status, 0);
    absl::StatusOr<PythonObjectLayout> layout = PythonObjectLayoutForVersion({3, python.minor, 0});
    ASSERT_TRUE(layout.ok()) << layout.status();
    size_t checked = 0;
    for (const auto& [name, value] : PythonObjectLayoutHeaderFields(*layout)) {
      auto it = expected.find(std::string(name));
      ASSERT_NE(it, expected.end()) << "print_object_offsets.c does not print " << name;
      EXPECT_EQ(value, it->second) << name;
      ++checked;
    }
    EXPECT_EQ(checked, expected.size()) << "print_object_offsets.c prints fields the table lacks";
  }
}

TEST(ObjectLayoutTest, TaskFieldsMatchLiveAsyncioTasksOfEveryInstalledVersion) {
  for (const InstalledPython& python : InstalledPythons()) {
    SCOPED_TRACE(python.label);
    int status = 0;
    const std::map<std::string, uint64_t> found = ParseLines(RunCommand(
        python.executable + " " PYSTROBE_SOURCE_DIR "/tests/workloads/python/probe_task_layout.py",
        &status));
    ASSERT_EQ(status, 0);
    ASSERT_EQ(found.at("version_minor"), static_cast<uint64_t>(python.minor));
    absl::StatusOr<PythonObjectLayout> layout = PythonObjectLayoutForVersion({3, python.minor, 0});
    ASSERT_TRUE(layout.ok());
    for (const auto& [name, value] : PythonObjectLayoutTaskFields(*layout)) {
      auto it = found.find(std::string(name));
      ASSERT_NE(it, found.end()) << "probe_task_layout.py does not print " << name;
      EXPECT_EQ(value, it->second) << name;
    }
  }
}

TEST(ObjectReaderTest, ReadsContainersWeakrefsAndAttributesOfALiveProcess) {
  for (const InstalledPython& python : InstalledPythons()) {
    SCOPED_TRACE(python.label);
    ReadyChild child(
        {python.executable, PYSTROBE_SOURCE_DIR "/tests/workloads/python/object_fixtures.py"});
    const std::map<std::string, uint64_t> ids = ParseLines(child.output());
    ASSERT_TRUE(ids.count("modules")) << child.output();
    absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(child.pid());
    ASSERT_TRUE(interpreter.ok()) << interpreter.status();
    // 3.13: where sys.modules is comes from the interpreter's _Py_DebugOffsets.
    absl::StatusOr<PythonObjectLayout> layout =
        PythonObjectLayoutFor(interpreter->version, interpreter->layout);
    ASSERT_TRUE(layout.ok());
    if (python.minor >= 13) {
      EXPECT_EQ(interpreter->layout.interp_modules, layout->interp_modules);
      EXPECT_EQ(layout->interp_modules,
                PythonObjectLayoutForVersion(interpreter->version)->interp_modules);
    }
    RemoteProcessMemory memory(child.pid());
    PythonObjectReader reader(memory, *interpreter, *layout);

    EXPECT_EQ(*reader.DictGetStr(ids.at("small_dict"), "alpha"), ids.at("small_dict_alpha"));
    EXPECT_EQ(*reader.DictGetStr(ids.at("small_dict"), "gamma"), 0u);
    absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> big =
        reader.DictItems(ids.at("big_dict"));
    ASSERT_TRUE(big.ok()) << big.status();
    EXPECT_EQ(big->size(), ids.at("big_dict_len"));
    EXPECT_EQ(*reader.DictGetStr(ids.at("big_dict"), "key999"), ids.at("big_dict_key999"));
    EXPECT_EQ(*reader.DictGetStr(ids.at("big_dict"), "key5"), 0u);

    absl::StatusOr<std::vector<uint64_t>> numbers = reader.SetItems(ids.at("number_set"));
    ASSERT_TRUE(numbers.ok()) << numbers.status();
    size_t ints = 0;
    for (uint64_t item : *numbers) ints += reader.TypeNameOf(item).value_or("") == "int";
    EXPECT_EQ(ints, ids.at("number_set_len"));

    EXPECT_EQ(reader.ListItems(ids.at("items"))->at(1), ids.at("items_1"));
    EXPECT_EQ(reader.TupleItems(ids.at("pair"))->at(0), ids.at("pair_0"));
    EXPECT_FALSE(reader.ListItems(ids.at("pair")).ok()) << "a tuple read as a list";
    EXPECT_EQ(*reader.WeakrefTarget(ids.at("alive")), ids.at("target"));
    EXPECT_EQ(*reader.WeakrefTarget(ids.at("dead")), 0u);

    // Instance attributes however this version stores them: a __dict__, a
    // managed dict, shared-key values, inline values.
    EXPECT_EQ(*reader.Attribute(ids.at("instance"), "second"), ids.at("instance_second"));
    EXPECT_EQ(*reader.Attribute(ids.at("grown"), "first"), ids.at("grown_first"));
    EXPECT_EQ(*reader.Attribute(ids.at("instance"), "missing"), 0u);
    absl::StatusOr<uint64_t> data = reader.Attribute(ids.at("weak_set"), "data");
    ASSERT_TRUE(data.ok()) << data.status();
    absl::StatusOr<std::vector<uint64_t>> refs = reader.SetItems(*data);
    ASSERT_TRUE(refs.ok()) << refs.status();
    ASSERT_EQ(refs->size(), 1u);
    EXPECT_EQ(*reader.WeakrefTarget(refs->at(0)), ids.at("target"));

    // sys.modules is where the asyncio reader starts.
    EXPECT_EQ(*reader.DictGetStr(ids.at("modules"), "sys"), ids.at("sys_module"));
    absl::StatusOr<uint64_t> interp = reader.Pointer(
        interpreter->runtime_address + interpreter->layout.abi.runtime_interpreters_head);
    ASSERT_TRUE(interp.ok());
    EXPECT_EQ(*reader.Pointer(*interp + layout->interp_modules), ids.at("modules"));
  }
}

TEST(ObjectReaderTest, GarbageIsAnErrorNotACrash) {
  for (const InstalledPython& python : InstalledPythons()) {
    SCOPED_TRACE(python.label);
    ReadyChild child(
        {python.executable, PYSTROBE_SOURCE_DIR "/tests/workloads/python/object_fixtures.py"});
    const std::map<std::string, uint64_t> ids = ParseLines(child.output());
    absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(child.pid());
    ASSERT_TRUE(interpreter.ok()) << interpreter.status();
    absl::StatusOr<PythonObjectLayout> layout = PythonObjectLayoutForVersion(interpreter->version);
    RemoteProcessMemory memory(child.pid());
    PythonObjectReader reader(memory, *interpreter, *layout);
    // Pointers into the middle of objects, to NULL, to unmapped memory.
    for (uint64_t address : {ids.at("small_dict") + 8, ids.at("items") + 3, uint64_t{0},
                             uint64_t{16}, uint64_t{0x7fffffff0000}}) {
      EXPECT_FALSE(reader.DictItems(address).ok());
      EXPECT_FALSE(reader.SetItems(address).ok());
      EXPECT_FALSE(reader.ListItems(address).ok());
      EXPECT_FALSE(reader.WeakrefTarget(address).ok());
    }
    EXPECT_FALSE(reader.DictItems(ids.at("number_set")).ok()) << "a set read as a dict";
  }
}

}  // namespace
}  // namespace pystrobe

// The readers behind `pystrobe dump --asyncio`, against every installed
// CPython: the object layout table against each version's headers and live
// _asyncio tasks, and the object reader against real objects of a live
// process (dicts, sets, lists, tuples, weakrefs, instance attributes).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daemon/python/asyncio_debug_offsets.h"
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
  const std::vector<InstalledPython> pythons =
      InstalledPythons(testing::PythonSet::kModern, /*with_free_threaded=*/true);
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
    absl::StatusOr<PythonObjectLayout> layout =
        PythonObjectLayoutForVersion({3, python.minor, 0}, python.free_threaded);
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
  for (const InstalledPython& python :
       InstalledPythons(testing::PythonSet::kModern, /*with_free_threaded=*/true)) {
    SCOPED_TRACE(python.label);
    int status = 0;
    const std::map<std::string, uint64_t> found = ParseLines(RunCommand(
        python.executable + " " PYSTROBE_SOURCE_DIR "/tests/workloads/python/probe_task_layout.py",
        &status));
    ASSERT_EQ(status, 0);
    ASSERT_EQ(found.at("version_minor"), static_cast<uint64_t>(python.minor));
    absl::StatusOr<PythonObjectLayout> layout =
        PythonObjectLayoutForVersion({3, python.minor, 0}, python.free_threaded);
    ASSERT_TRUE(layout.ok());
    for (const auto& [name, value] : PythonObjectLayoutTaskFields(*layout)) {
      auto it = found.find(std::string(name));
      ASSERT_NE(it, found.end()) << "probe_task_layout.py does not print " << name;
      EXPECT_EQ(value, it->second) << name;
    }
  }
}

TEST(ObjectReaderTest, ReadsContainersWeakrefsAndAttributesOfALiveProcess) {
  for (const InstalledPython& python :
       InstalledPythons(testing::PythonSet::kModern, /*with_free_threaded=*/true)) {
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
      EXPECT_EQ(
          layout->interp_modules,
          PythonObjectLayoutForVersion(interpreter->version, python.free_threaded)->interp_modules);
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

// A set that grows and shrinks while it is read (asyncio's WeakSet of tasks
// under churn), in bursts: its table is refilled and freed under the reader.
// Every read that succeeds holds the element that was there all along; one
// that cannot get a stable table says so, and between bursts reads succeed.
TEST(ObjectReaderTest, ASetResizedWhileReadIsReadWholeOrRefused) {
  constexpr char kChurn[] =
      "import sys, time\n"
      "steady = object()\n"
      "churn = {steady}\n"
      "sys.stdout.write('steady=%d\\nset=%d\\nready\\n' % (id(steady), id(churn)))\n"
      "sys.stdout.flush()\n"
      "while True:\n"
      "    for burst in range(10):\n"
      "        for i in range(2000):\n"
      "            churn.add(i)\n"
      "        for i in range(2000):\n"
      "            churn.discard(i)\n"
      "    time.sleep(0.002)\n";
  for (const InstalledPython& python :
       InstalledPythons(testing::PythonSet::kModern, /*with_free_threaded=*/false)) {
    SCOPED_TRACE(python.label);
    ReadyChild child({python.executable, "-c", kChurn});
    const std::map<std::string, uint64_t> ids = ParseLines(child.output());
    ASSERT_TRUE(ids.count("set")) << child.output();
    absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(child.pid());
    ASSERT_TRUE(interpreter.ok()) << interpreter.status();
    absl::StatusOr<PythonObjectLayout> layout =
        PythonObjectLayoutFor(interpreter->version, interpreter->layout);
    ASSERT_TRUE(layout.ok());
    RemoteProcessMemory memory(child.pid());
    PythonObjectReader reader(memory, *interpreter, *layout);
    int whole = 0;
    for (int read = 0; read < 3000; ++read) {
      absl::StatusOr<std::vector<uint64_t>> items = reader.SetItems(ids.at("set"));
      if (!items.ok()) {
        EXPECT_EQ(items.status().code(), absl::StatusCode::kUnavailable) << items.status();
        continue;
      }
      ++whole;
      EXPECT_NE(std::find(items->begin(), items->end(), ids.at("steady")), items->end())
          << "read " << read << ": " << items->size() << " items without the steady one";
    }
    EXPECT_GT(whole, 0);
  }
}

TEST(ObjectReaderTest, GarbageIsAnErrorNotACrash) {
  for (const InstalledPython& python :
       InstalledPythons(testing::PythonSet::kModern, /*with_free_threaded=*/true)) {
    SCOPED_TRACE(python.label);
    ReadyChild child(
        {python.executable, PYSTROBE_SOURCE_DIR "/tests/workloads/python/object_fixtures.py"});
    const std::map<std::string, uint64_t> ids = ParseLines(child.output());
    absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(child.pid());
    ASSERT_TRUE(interpreter.ok()) << interpreter.status();
    absl::StatusOr<PythonObjectLayout> layout =
        PythonObjectLayoutForVersion(interpreter->version, python.free_threaded);
    ASSERT_TRUE(layout.ok()) << layout.status();
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

// Where the 3.14+ headers put what _asyncio's .AsyncioDebug section claims
// about the interpreter and thread states (TaskObj is in no header).
constexpr char kPrintAsyncioStateOffsets[] = R"(
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_interp.h"
#include "internal/pycore_tstate.h"
int main(void) {
  printf("asyncio_interpreter_state.size=%zu\n", sizeof(PyInterpreterState));
  printf("asyncio_interpreter_state.asyncio_tasks_head=%zu\n",
         offsetof(PyInterpreterState, asyncio_tasks_head));
  printf("asyncio_thread_state.size=%zu\n", sizeof(_PyThreadStateImpl));
  printf("asyncio_thread_state.asyncio_running_loop=%zu\n",
         offsetof(_PyThreadStateImpl, asyncio_running_loop));
  printf("asyncio_thread_state.asyncio_running_task=%zu\n",
         offsetof(_PyThreadStateImpl, asyncio_running_task));
  printf("asyncio_thread_state.asyncio_tasks_head=%zu\n",
         offsetof(_PyThreadStateImpl, asyncio_tasks_head));
  return 0;
}
)";

TEST(AsyncioDebugOffsetsTest, WhatALiveProcessPublishesMatchesItsHeadersAndTheTaskTable) {
  const std::string source = ::testing::TempDir() + "/pystrobe_print_asyncio_offsets.c";
  const std::string binary = ::testing::TempDir() + "/pystrobe_print_asyncio_offsets";
  std::ofstream(source) << kPrintAsyncioStateOffsets;
  size_t checked_versions = 0;
  for (const InstalledPython& python : InstalledPythons()) {
    if (python.free_threaded) continue;
    SCOPED_TRACE(python.label);
    // Imports asyncio (which loads _asyncio where it is an extension module).
    ReadyChild child({python.executable, "-c",
                      "import asyncio, time; print('ready', flush=True); time.sleep(60)"});
    absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(child.pid());
    ASSERT_TRUE(interpreter.ok()) << interpreter.status();
    absl::StatusOr<std::optional<AsyncioDebugOffsets>> found =
        FindAsyncioDebugOffsets(*interpreter);
    ASSERT_TRUE(found.ok()) << found.status();
    if (python.minor < 14) {
      EXPECT_FALSE(found->has_value()) << "no .AsyncioDebug before 3.14";
      continue;
    }
    ASSERT_TRUE(found->has_value()) << "3.14+ publishes its asyncio offsets";
    const AsyncioDebugOffsets& offsets = **found;

    // The structures' sizes depend on how the core was built (-D_Py_TIER2,
    // -D_Py_JIT in Debian's 3.15), which no installed header says.
    int status = 0;
    const std::string core_defines = RunCommand(
        python.executable +
            " -c \"import sysconfig; print(' '.join(f for f in (sysconfig.get_config_var("
            "'PY_CORE_CFLAGS') or '').split() if f.startswith('-D_Py')))\"",
        &status);
    ASSERT_EQ(status, 0);
    std::string command = "cc -DPy_BUILD_CORE " +
                          std::string(absl::StripAsciiWhitespace(core_defines)) + " -o " + binary +
                          " " + source;
    for (const std::string& dir : python.include_dirs) command += " -I" + dir;
    command += " " + python.compile_flags;
    const std::string compile_output = RunCommand(command + " 2>&1", &status);
    ASSERT_EQ(status, 0) << command << "\n" << compile_output;
    const std::map<std::string, uint64_t> expected = ParseLines(RunCommand(binary, &status));
    ASSERT_EQ(status, 0);
    ASSERT_EQ(expected.size(), 6u);
    for (const auto& [name, value] : AsyncioDebugOffsetsFields(offsets)) {
      auto it = expected.find(name);
      if (it != expected.end()) {
        EXPECT_EQ(value, it->second) << name;
      }
    }
    // Where the table, checked against live tasks, says a task keeps them.
    absl::StatusOr<PythonObjectLayout> layout = PythonObjectLayoutForVersion({3, python.minor, 0});
    ASSERT_TRUE(layout.ok());
    EXPECT_EQ(offsets.task.task_coro, layout->task_coro);
    EXPECT_EQ(offsets.task.task_name, layout->task_name);
    // The list node lies after the Future's fields the table reads.
    EXPECT_GT(offsets.task.task_node, layout->task_fut_waiter);
    ++checked_versions;
  }
  if (checked_versions == 0) GTEST_SKIP() << "no CPython 3.14+ installed (scripts/test-pythons.sh)";
}

std::vector<uint8_t> Encode(const std::vector<uint64_t>& words) {
  std::vector<uint8_t> bytes(words.size() * 8);
  std::memcpy(bytes.data(), words.data(), bytes.size());
  return bytes;
}

TEST(AsyncioDebugOffsetsTest, MalformedSectionsAreRefusedNamingTheField) {
  // Debian's 3.14.10, as its _asyncio module publishes them.
  const std::vector<uint64_t> good = {168,    136,   96,  108, 109, 128, 152,
                                      225864, 10880, 936, 864, 872, 880};
  absl::StatusOr<AsyncioDebugOffsets> parsed = ParseAsyncioDebugOffsets(Encode(good));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->task.task_node, 152u);
  EXPECT_EQ(parsed->thread.asyncio_tasks_head, 880u);

  std::vector<uint8_t> truncated = Encode(good);
  truncated.resize(96);
  EXPECT_FALSE(ParseAsyncioDebugOffsets(truncated).ok());

  std::vector<uint64_t> node_past_end = good;
  node_past_end[6] = 160;  // a 16-byte node at 160 of a 168-byte task
  absl::StatusOr<AsyncioDebugOffsets> bad = ParseAsyncioDebugOffsets(Encode(node_past_end));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("task_node"), std::string::npos) << bad.status();

  std::vector<uint64_t> in_header = good;
  in_header[5] = 8;  // task_coro inside the object header
  EXPECT_FALSE(ParseAsyncioDebugOffsets(Encode(in_header)).ok());

  std::vector<uint64_t> huge_thread = good;
  huge_thread[9] = uint64_t{1} << 40;
  EXPECT_FALSE(ParseAsyncioDebugOffsets(Encode(huge_thread)).ok());

  std::vector<uint64_t> head_outside = good;
  head_outside[12] = 930;  // past the thread state's 936 bytes with its 16-byte node
  EXPECT_FALSE(ParseAsyncioDebugOffsets(Encode(head_outside)).ok());
}

}  // namespace
}  // namespace pystrobe

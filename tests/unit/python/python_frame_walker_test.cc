// Discovery, offsets, frame walk and symbolization against live interpreters:
// every installed CPython runs tests/workloads/python/threads_waiting.py, and
// the userspace walker (the same steps as the kernel walker) must find every
// thread with the expected functions and lines, and the GIL holder.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/python/code_object_reader.h"
#include "daemon/python/frame_walker.h"
#include "daemon/python/interpreter_finder.h"
#include "daemon/python/process_memory.h"
#include "tests/unit/python/python_test_support.h"

namespace pystrobe {
namespace {

using testing::InstalledPython;
using testing::InstalledPythons;

constexpr char kWorkload[] = PYSTROBE_SOURCE_DIR "/tests/workloads/python/threads_waiting.py";

// A child process whose stdout we read line by line; killed on destruction.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) {
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
    out_ = fdopen(fds[0], "r");
  }
  ~Child() {
    Kill();
    if (out_ != nullptr) fclose(out_);
  }
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  pid_t pid() const { return pid_; }
  // Lines up to (not including) `last`; empty when the child ends first.
  std::vector<std::string> ReadUntil(const std::string& last) {
    std::vector<std::string> lines;
    char buffer[16384];
    while (out_ != nullptr && fgets(buffer, sizeof(buffer), out_) != nullptr) {
      std::string line(buffer);
      if (!line.empty() && line.back() == '\n') line.pop_back();
      if (line == last) return lines;
      lines.push_back(line);
    }
    return {};
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

struct ExpectedThread {
  uint64_t ident = 0;
  uint64_t native_id = 0;
  std::vector<std::pair<std::string, std::string>> frames;  // name, line or "*"
};

std::vector<ExpectedThread> ParseReport(const std::vector<std::string>& lines) {
  std::vector<ExpectedThread> threads;
  for (const std::string& line : lines) {
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() < 4 || words[0] != "thread") continue;
    ExpectedThread thread;
    thread.ident = std::stoull(words[1]);
    thread.native_id = std::stoull(words[2]);
    for (size_t i = 3; i < words.size(); ++i) {
      std::pair<std::string, std::string> frame = absl::StrSplit(words[i], '@');
      thread.frames.push_back(frame);
    }
    threads.push_back(thread);
  }
  return threads;
}

struct SymbolizedThread {
  PythonThread thread;
  std::vector<PythonFrameSymbol> frames;
};

std::string Describe(const SymbolizedThread& t) {
  std::vector<std::string> parts;
  for (const PythonFrameSymbol& f : t.frames) {
    parts.push_back(f.name + "@" + std::to_string(f.line));
  }
  return absl::StrCat("thread ", t.thread.thread_id, " gil=", t.thread.holds_gil, ": ",
                      absl::StrJoin(parts, " "));
}

// Empty when `actual` is what `expected` says, else what differs.
std::string Compare(const ExpectedThread& expected, const SymbolizedThread& actual, bool is_main) {
  if (actual.frames.size() < expected.frames.size() + 1) return "too few frames";
  for (size_t i = 0; i < expected.frames.size(); ++i) {
    const PythonFrameSymbol& frame = actual.frames[i];
    if (frame.name != expected.frames[i].first) return "name of frame " + std::to_string(i);
    if (expected.frames[i].second != "*" &&
        std::to_string(frame.line) != expected.frames[i].second) {
      return "line of frame " + std::to_string(i);
    }
    if (frame.filename != kWorkload) return "file of frame " + std::to_string(i);
  }
  const PythonFrameSymbol& outermost = actual.frames.back();
  if (is_main) {
    if (outermost.name != "<module>" || outermost.filename != kWorkload) return "main's bottom";
  } else if (!absl::EndsWith(outermost.name, "_bootstrap")) {  // 2.7: __bootstrap
    return "thread's bottom frame is " + outermost.name;
  } else if (!absl::EndsWith(outermost.filename, "threading.py")) {
    return "thread's bottom frame not in threading.py";
  }
  return "";
}

void CheckInterpreter(const InstalledPython& python) {
  Child child({python.executable, kWorkload});
  ASSERT_GT(child.pid(), 0);
  const std::vector<ExpectedThread> expected = ParseReport(child.ReadUntil("ready"));
  ASSERT_EQ(expected.size(), 5u) << "the workload did not report its threads";

  absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(child.pid());
  ASSERT_TRUE(interpreter.ok()) << interpreter.status();
  EXPECT_EQ(interpreter->version.major, python.major);
  EXPECT_EQ(interpreter->version.minor, python.minor);
  EXPECT_GE(interpreter->version.micro, 0);
  EXPECT_EQ(interpreter->layout_from_debug_offsets, python.major == 3 && python.minor >= 13);
  EXPECT_EQ(interpreter->layout.abi.free_threaded != 0, python.free_threaded);
  if (interpreter->layout_from_debug_offsets && !python.free_threaded) {
    // The interpreter's own offsets agree with our table for its version.
    absl::StatusOr<PythonLayout> table = PythonLayoutForVersion(interpreter->version);
    ASSERT_TRUE(table.ok());
    EXPECT_EQ(PythonLayoutFields(interpreter->layout), PythonLayoutFields(*table));
  } else if (interpreter->layout_from_debug_offsets) {
    // A free-threaded build has no table: its own offsets agree with its headers.
    const std::map<std::string, uint64_t> headers =
        testing::ParseOffsetLines(testing::PrintOffsets(python, "", ""));
    ASSERT_FALSE(headers.empty()) << "print_offsets.c against " << python.label;
    for (const auto& [name, value] : PythonLayoutFields(interpreter->layout)) {
      EXPECT_EQ(value, headers.at(std::string(name))) << name;
    }
  }
  std::cout << "[ FOUND    ] " << python.label << ": CPython " << interpreter->version.ToString()
            << " in " << interpreter->binary_path << ", roots at 0x" << std::hex
            << interpreter->runtime_address << std::dec
            << (interpreter->layout_from_debug_offsets ? " (offsets from _Py_DebugOffsets)" : "")
            << "\n";

  RemoteProcessMemory memory(child.pid());
  PythonFrameWalker walker(memory, *interpreter);
  CodeObjectReader reader(memory, *interpreter);
  // Threads report in the order they get going, which load may change: the
  // spinner is the one whose innermost frame is spinner().
  uint64_t spinner_ident = 0;
  for (const ExpectedThread& thread : expected) {
    if (!thread.frames.empty() && thread.frames.front().first == "spinner") {
      spinner_ident = thread.ident;
    }
  }
  ASSERT_NE(spinner_ident, 0u) << "the workload reported no spinner";
  bool spinner_held_gil = false;
  std::string mismatch = "never walked";
  std::vector<SymbolizedThread> last;
  // Threads report just before they block: retry until all have got there.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);  // liveness
  while (std::chrono::steady_clock::now() < deadline) {
    absl::StatusOr<std::vector<PythonThread>> threads = walker.WalkAllThreads();
    ASSERT_TRUE(threads.ok()) << threads.status();
    last.clear();
    int gil_holders = 0;
    for (const PythonThread& thread : *threads) {
      SymbolizedThread symbolized{thread, {}};
      for (const PythonFrame& frame : thread.frames) {
        absl::StatusOr<PythonFrameSymbol> symbol =
            reader.Symbolize(frame.code_address, frame.stamp, frame.instr_offset);
        ASSERT_TRUE(symbol.ok()) << symbol.status();
        symbolized.frames.push_back(*symbol);
      }
      gil_holders += thread.holds_gil;
      if (thread.holds_gil && thread.thread_id == spinner_ident) spinner_held_gil = true;
      last.push_back(std::move(symbolized));
    }
    EXPECT_LE(gil_holders, 1);
    mismatch.clear();
    if (last.size() != expected.size()) {
      mismatch = absl::StrCat(last.size(), " threads");
    }
    for (const ExpectedThread& want : expected) {
      if (!mismatch.empty()) break;
      const SymbolizedThread* found = nullptr;
      for (const SymbolizedThread& t : last) {
        if (t.thread.thread_id == want.ident) found = &t;
      }
      if (found == nullptr) {
        mismatch = absl::StrCat("no thread ", want.ident);
        break;
      }
      if (found->thread.native_thread_id.has_value() &&
          *found->thread.native_thread_id != want.native_id) {
        mismatch = absl::StrCat("native id of thread ", want.ident);
        break;
      }
      if (python.minor >= 11 && !found->thread.native_thread_id.has_value()) {
        mismatch = "no native thread id on 3.11+";
        break;
      }
      std::string why = Compare(want, *found, &want == &expected.back());
      if (!why.empty()) mismatch = absl::StrCat(Describe(*found), ": ", why);
    }
    // A free-threaded build has no GIL: there the spinner never holds one.
    if (mismatch.empty() && (spinner_held_gil || python.free_threaded)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(mismatch, "");
  if (python.free_threaded) {
    EXPECT_FALSE(spinner_held_gil) << "a GIL holder on a build without a GIL";
  } else {
    EXPECT_TRUE(spinner_held_gil) << "the spinning thread was never seen holding the GIL";
  }
  for (const SymbolizedThread& t : last) {
    EXPECT_FALSE(t.thread.truncated);
    if (!mismatch.empty()) std::cout << "  " << Describe(t) << "\n";
  }
  EXPECT_GT(reader.cached_objects(), 5u);

  // Garbage is an error, never a name: _PyRuntime is not a code object.
  absl::StatusOr<PythonFrameSymbol> garbage = reader.Symbolize(interpreter->runtime_address, 0, 0);
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kDataLoss) << garbage.status();
  // A stamp that does not match the object at the address: reused address.
  const PythonFrame& top = last.front().thread.frames.front();
  absl::StatusOr<PythonFrameSymbol> reused =
      reader.Symbolize(top.code_address, top.stamp ^ 1, top.instr_offset);
  EXPECT_EQ(reused.status().code(), absl::StatusCode::kFailedPrecondition) << reused.status();

  // The process exits mid-use: a clear error, no crash.
  child.Kill();
  absl::StatusOr<std::vector<PythonThread>> after = walker.WalkAllThreads();
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), absl::StatusCode::kNotFound) << after.status();
  EXPECT_TRUE(absl::StrContains(after.status().message(), "exited")) << after.status();
}

TEST(PythonFrameWalkerTest, WalksEveryThreadOfEveryInstalledInterpreter) {
  const std::vector<InstalledPython> pythons =
      InstalledPythons(testing::PythonSet::kWithOld, /*with_free_threaded=*/true);
  ASSERT_FALSE(pythons.empty()) << "no CPython 3.8 to 3.13 on this machine";
  for (const InstalledPython& python : pythons) {
    SCOPED_TRACE(python.label);
    CheckInterpreter(python);
  }
}

TEST(PythonFrameWalkerTest, FindsLibpythonEmbeddedInACProgram) {
  int built = 0;
  for (const InstalledPython& python : InstalledPythons()) {
    if (!absl::StartsWith(python.label, "pyenv")) continue;  // a shared libpython to link
    SCOPED_TRACE(python.label);
    const std::string config = python.executable + "-config";
    const std::string binary = ::testing::TempDir() + "/pystrobe_embed_python";
    const std::string command =
        "cc -o " + binary + " " PYSTROBE_SOURCE_DIR "/tests/workloads/python/embed_python.c $(" +
        config + " --cflags) $(" + config + " --ldflags --embed) -Wl,-rpath,$(" + config +
        " --prefix)/lib 2>&1";
    int status = 0;
    const std::string output = testing::RunCommand(command, &status);
    ASSERT_EQ(status, 0) << command << "\n" << output;
    ++built;
    Child child({binary});
    ASSERT_EQ(child.ReadUntil("ready").size(), 0u);
    absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(child.pid());
    ASSERT_TRUE(interpreter.ok()) << interpreter.status();
    EXPECT_EQ(interpreter->version.minor, python.minor);
    EXPECT_TRUE(absl::StrContains(interpreter->binary_path, "libpython3."));
    RemoteProcessMemory memory(child.pid());
    PythonFrameWalker walker(memory, *interpreter);
    CodeObjectReader reader(memory, *interpreter);
    bool seen = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);  // liveness
    while (!seen && std::chrono::steady_clock::now() < deadline) {
      absl::StatusOr<std::vector<PythonThread>> threads = walker.WalkAllThreads();
      ASSERT_TRUE(threads.ok()) << threads.status();
      ASSERT_EQ(threads->size(), 1u);
      const std::vector<PythonFrame>& frames = threads->front().frames;
      if (frames.size() == 2) {
        absl::StatusOr<PythonFrameSymbol> top =
            reader.Symbolize(frames[0].code_address, frames[0].stamp, frames[0].instr_offset);
        ASSERT_TRUE(top.ok()) << top.status();
        seen = top->name == "embedded_wait" && top->line == 5 && top->filename == "<string>";
      }
      if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(seen) << "embedded_wait at <string>:5 never seen";
  }
  std::cout << "[ CHECKED  ] " << built << " embedding programs\n";
}

// 2.7 and 3.6 keep interp_head and the GIL's wait objects in file-scope
// statics, which only .symtab names. Without it (a stripped libpython) the
// thread states are still found, through PyInterpreterState_Head's code; only
// GIL wait is lost.
TEST(PythonInterpreterFinderTest, FindsOldInterpretersInAStrippedLibpython) {
  int checked = 0;
  for (const InstalledPython& python : InstalledPythons(testing::PythonSet::kWithOld)) {
    if (python.major == 3 && python.minor != 6) continue;
    SCOPED_TRACE(python.label);
    const std::filesystem::path lib_dir =
        std::filesystem::path(python.executable).parent_path().parent_path() / "lib";
    std::string library;
    for (const auto& entry : std::filesystem::directory_iterator(lib_dir)) {
      const std::string name = entry.path().filename().string();
      if (absl::StartsWith(name, "libpython") && absl::EndsWith(name, ".so.1.0")) library = name;
    }
    ASSERT_FALSE(library.empty()) << "no shared libpython in " << lib_dir;
    const std::string stripped_dir =
        (std::filesystem::path(::testing::TempDir()) / ("stripped-" + library))
            .lexically_normal()
            .string();
    std::filesystem::create_directories(stripped_dir);
    int status = 0;
    const std::string command = "strip --strip-all -o " + stripped_dir + "/" + library + " " +
                                (lib_dir / library).string() + " 2>&1";
    const std::string output = testing::RunCommand(command, &status);
    ASSERT_EQ(status, 0) << command << "\n" << output;
    // LD_LIBRARY_PATH wins over pyenv's RUNPATH.
    Child child({"/usr/bin/env", "LD_LIBRARY_PATH=" + stripped_dir, python.executable, "-c",
                 "import sys, time\ndef parked():\n    time.sleep(60)\n"
                 "sys.stdout.write('ready\\n'); sys.stdout.flush(); parked()"});
    child.ReadUntil("ready");
    absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(child.pid());
    ASSERT_TRUE(interpreter.ok()) << interpreter.status();
    EXPECT_EQ(interpreter->binary_path, stripped_dir + "/" + library);
    EXPECT_EQ(interpreter->version.minor, python.minor);
    EXPECT_EQ(interpreter->layout.abi.gil_wait_span, 0) << "GIL wait without its symbols";
    RemoteProcessMemory memory(child.pid());
    PythonFrameWalker walker(memory, *interpreter);
    CodeObjectReader reader(memory, *interpreter);
    // "ready" comes just before the call to parked(): retry until it is in.
    absl::StatusOr<std::vector<PythonThread>> threads;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);  // liveness
    do {
      threads = walker.WalkAllThreads();
      ASSERT_TRUE(threads.ok()) << threads.status();
      ASSERT_EQ(threads->size(), 1u);
      if (threads->front().frames.size() == 2) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
    ASSERT_EQ(threads->front().frames.size(), 2u);
    const PythonFrame& top = threads->front().frames.front();
    absl::StatusOr<PythonFrameSymbol> symbol =
        reader.Symbolize(top.code_address, top.stamp, top.instr_offset);
    ASSERT_TRUE(symbol.ok()) << symbol.status();
    EXPECT_EQ(symbol->name, "parked");
    EXPECT_EQ(symbol->line, 3);
    ++checked;
  }
  std::cout << "[ CHECKED  ] " << checked << " stripped libpythons\n";
}

TEST(PythonInterpreterFinderTest, ProcessWithoutPythonIsNotFound) {
  Child child({"/bin/sh", "-c", "echo ready; exec sleep 60"});
  child.ReadUntil("ready");
  absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(child.pid());
  EXPECT_EQ(interpreter.status().code(), absl::StatusCode::kNotFound) << interpreter.status();
}

// What discovery says of an interpreter, less where this run put it.
std::string DescribeFound(const PythonInterpreter& interpreter) {
  std::ostringstream out;
  out << interpreter.version.ToString() << " in " << interpreter.binary_path
      << (interpreter.layout.abi.free_threaded ? " free-threaded" : "")
      << (interpreter.layout_from_debug_offsets ? " from _Py_DebugOffsets" : "") << std::hex
      << " runtime +0x" << interpreter.runtime_address - interpreter.load_bias;
  for (const auto& [name, value] : PythonLayoutFields(interpreter.layout)) {
    out << " " << name << "=" << value;
  }
  return out.str();
}

// A sampler looks at a new process whenever its first samples come, which
// may be while the dynamic loader is still mapping libpython (a stressed run
// once found a free-threaded 3.14 as one with a GIL, and read no Python frame
// of it). Stopped at every change to its memory map from exec to exit, each
// interpreter is found either exactly as it is at exit, or not yet (NotFound
// or Unavailable, looked at again later); never a refusal that would end the
// looking.
TEST(PythonInterpreterFinderTest, StartingInterpreterIsFoundWholeOrNotYet) {
  int checked = 0;
  for (const InstalledPython& python : InstalledPythons(testing::PythonSet::kWithOld, true)) {
    SCOPED_TRACE(python.label);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
      raise(SIGSTOP);
      execl(python.executable.c_str(), python.executable.c_str(), "-c", "pass", nullptr);
      _exit(127);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSTOPPED(status));
    ASSERT_EQ(ptrace(PTRACE_SETOPTIONS, pid, nullptr,
                     PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL),
              0);
    // Found at each stop, in order: a description, or the error.
    std::vector<std::string> found;
    std::vector<std::string> refused;
    int not_yet = 0;
    int still_loading = 0;
    bool entering = true;  // syscall stops alternate: entry, exit
    int signal = 0;
    while (ptrace(PTRACE_SYSCALL, pid, nullptr, signal) == 0 && waitpid(pid, &status, 0) == pid &&
           WIFSTOPPED(status)) {
      signal = 0;
      if (WSTOPSIG(status) != (SIGTRAP | 0x80)) {
        // An exec event stop (its syscall's exit stop follows), or a signal for it.
        if (status >> 8 != (SIGTRAP | (PTRACE_EVENT_EXEC << 8))) signal = WSTOPSIG(status);
        continue;
      }
      user_regs_struct regs;
      ASSERT_EQ(ptrace(PTRACE_GETREGS, pid, nullptr, &regs), 0);
      const uint64_t call = regs.orig_rax;
      const bool maps_changed = !entering && (call == SYS_mmap || call == SYS_munmap ||
                                              call == SYS_mprotect || call == SYS_execve);
      const bool last_look = entering && call == SYS_exit_group;
      entering = !entering;
      if (!maps_changed && !last_look) continue;
      absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(pid);
      if (interpreter.ok()) {
        found.push_back(DescribeFound(*interpreter));
      } else if (absl::IsNotFound(interpreter.status())) {
        ++not_yet;
      } else if (absl::IsUnavailable(interpreter.status())) {
        ++not_yet;
        ++still_loading;
      } else {
        refused.push_back(interpreter.status().ToString());
      }
      if (last_look) {
        ASSERT_TRUE(interpreter.ok()) << "at exit: " << interpreter.status();
        EXPECT_EQ(interpreter->version.minor, python.minor);
        EXPECT_EQ(interpreter->layout.abi.free_threaded != 0, python.free_threaded);
        for (const std::string& earlier : found) EXPECT_EQ(earlier, found.back());
        break;
      }
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    EXPECT_TRUE(refused.empty()) << absl::StrJoin(refused, "\n");
    std::cout << "[ STARTED  ] " << python.label << ": not yet " << not_yet << " times ("
              << still_loading << " mid-load), then found " << found.size() << " times\n";
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(PythonInterpreterFinderTest, ExitedProcessIsNotFound) {
  Child child({"/bin/true"});
  const pid_t pid = child.pid();
  child.Kill();
  absl::StatusOr<PythonInterpreter> interpreter = FindPythonInterpreter(pid);
  EXPECT_EQ(interpreter.status().code(), absl::StatusCode::kNotFound) << interpreter.status();
}

TEST(PythonInterpreterFinderTest, VersionFromFileNames) {
  EXPECT_EQ(PythonVersionFromFileName("/usr/lib/libpython3.9.so.1.0"), (PythonVersion{3, 9, -1}));
  EXPECT_EQ(PythonVersionFromFileName("/usr/bin/python3.11"), (PythonVersion{3, 11, -1}));
  EXPECT_EQ(PythonVersionFromFileName("/x/libpython3.7m.so.1.0"), (PythonVersion{3, 7, -1}));
  EXPECT_EQ(PythonVersionFromFileName("/x/libpython2.7.so"), (PythonVersion{2, 7, -1}));
  EXPECT_EQ(PythonVersionFromFileName("/usr/bin/python3").major, 0);
  EXPECT_EQ(PythonVersionFromFileName("/usr/bin/bash").major, 0);
}

TEST(PythonInterpreterFinderTest, ParsesProcMaps) {
  const std::vector<MemoryMapping> maps = ParseProcMaps(
      "00400000-00401000 r--p 00000000 08:01 123  /usr/bin/python3.11\n"
      "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
      "7f0000100000-7f0000200000 r-xp 00012000 08:01 456   /lib/libpython3.9.so.1.0 (deleted)\n"
      "garbage\n");
  ASSERT_EQ(maps.size(), 3u);
  EXPECT_EQ(maps[0].start, 0x400000u);
  EXPECT_EQ(maps[0].path, "/usr/bin/python3.11");
  EXPECT_EQ(maps[1].path, "");
  EXPECT_EQ(maps[2].offset, 0x12000u);
  EXPECT_EQ(maps[2].perms, "r-xp");
  EXPECT_EQ(maps[2].path, "/lib/libpython3.9.so.1.0 (deleted)");
}

}  // namespace
}  // namespace pystrobe

// Code objects of a real python3.11 child interned per frame and per sample:
// the ids a sample's frames get do not depend on which of a thread's earlier
// samples shared them.
#include "daemon/recording/python_code_table.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pystrobe {
namespace {

constexpr char kPython[] = "/usr/bin/python3.11";

// A python3.11 that prints the addresses of three code objects and sleeps.
class PythonChild {
 public:
  PythonChild() {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      execl(kPython, kPython, "-c",
            "import sys, time\n"
            "def f(): pass\n"
            "def g(): pass\n"
            "def h(): pass\n"
            "print(id(f.__code__), id(g.__code__), id(h.__code__), flush=True)\n"
            "time.sleep(60)\n",
            nullptr);
      _exit(127);
    }
    close(out[1]);
    FILE* file = fdopen(out[0], "r");
    char line[256] = {};
    if (fgets(line, sizeof(line), file) != nullptr) {
      std::istringstream in(line);
      uint64_t address;
      while (in >> address) codes_.push_back(address);
    }
    fclose(file);
  }
  ~PythonChild() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  const std::vector<uint64_t>& codes() const { return codes_; }

 private:
  pid_t pid_ = -1;
  std::vector<uint64_t> codes_;
};

TEST(PythonCodeTableTest, FramesSharedWithAThreadsLastSampleGetTheIdsInternGives) {
  if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is not installed";
  PythonChild child;
  ASSERT_EQ(child.codes().size(), 3u);
  absl::StatusOr<std::unique_ptr<PythonProcess>> python = PythonProcess::Discover(child.pid());
  ASSERT_TRUE(python.ok()) << python.status();
  RemoteProcessMemory memory(child.pid());
  CodeObjectReader reader(memory, (*python)->interpreter());
  std::vector<PythonFrameRecord> f_g_h;  // innermost first: f called by g called by h
  for (uint64_t address : child.codes()) {
    absl::StatusOr<uint32_t> stamp = reader.CurrentStamp(address);
    ASSERT_TRUE(stamp.ok()) << stamp.status();
    f_g_h.push_back({.code = address, .stamp = *stamp});
  }
  // A frame whose code object cannot be read: no such object.
  const PythonFrameRecord garbage = {.code = 0x10, .stamp = 7};

  PythonCodeTable table;
  PythonCodeCopies copies;
  const uint32_t pid = static_cast<uint32_t>(child.pid());
  auto intern = [&](const PythonFrameRecord& frame) {
    return table.Intern(/*image=*/1, pid, **python, frame.code, frame.stamp, copies);
  };
  std::vector<PythonCodeId> ids;
  table.InternFrames(1, /*tid=*/5, pid, **python, f_g_h, copies, ids);
  ASSERT_EQ(ids.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ids[i], intern(f_g_h[i]));
    ASSERT_NE(table.Get(ids[i]), nullptr);
  }
  EXPECT_EQ(table.Get(ids[0])->name, "f");
  EXPECT_EQ(table.Get(ids[2])->name, "h");

  // The same thread now in g (called by h), then in an unreadable frame
  // under g and h, then in f again; another thread in f under an
  // unreadable outer frame.
  std::vector<std::vector<PythonFrameRecord>> samples = {
      {f_g_h[1], f_g_h[2]}, {garbage, f_g_h[1], f_g_h[2]}, f_g_h,
      {f_g_h[0], garbage},  {f_g_h[0], garbage},
  };
  std::vector<uint32_t> tids = {5, 5, 5, 6, 6};
  for (size_t s = 0; s < samples.size(); ++s) {
    table.InternFrames(1, tids[s], pid, **python, samples[s], copies, ids);
    ASSERT_EQ(ids.size(), samples[s].size());
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(ids[i], intern(samples[s][i])) << "sample " << s << ", frame " << i;
    }
  }
  EXPECT_EQ(table.Get(intern(garbage)), nullptr);

  // Forgotten ids are not handed out again from a thread's last sample.
  table.ForgetImages([](uint32_t) { return true; }, /*counted=*/false);
  table.InternFrames(1, 5, pid, **python, f_g_h, copies, ids);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ids[i], intern(f_g_h[i]));
    ASSERT_NE(table.Get(ids[i]), nullptr);
  }
}

}  // namespace
}  // namespace pystrobe

// Who a sample says it is of: its process and thread, the thread's name and
// its cgroup, which the sampling programs load from the task itself
// (bpf/current_task.bpf.h); and the pid filter's verdict, which each CPU keeps
// for the process it looked at last and a target added later must void
// (bpf/targets.bpf.h).
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/bpf/bpf_test_support.h"

namespace pystrobe::bpf_test {
namespace {

// Where the cgroup v2 hierarchy is mounted (with its root at /), or "".
std::string CgroupMount() {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    // ID PARENT MAJOR:MINOR ROOT MOUNT_POINT OPTIONS... - FSTYPE SOURCE OPTIONS
    size_t separator = line.find(" - ");
    if (separator == std::string::npos || line.compare(separator + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, separator));
    std::string id, parent, device, root, mount_point;
    fields >> id >> parent >> device >> root >> mount_point;
    if (root == "/") return mount_point;
  }
  return "";
}

// This process's cgroup v2 group, as /proc/self/cgroup names it.
std::string ThisCgroup() {
  std::ifstream cgroups("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroups, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "/";
}

// The id of this process's cgroup v2 group: the inode of its directory where
// the hierarchy is mounted, else the root's (1: every task is in it).
uint64_t ThisCgroupId() {
  struct stat directory;
  std::string mount = CgroupMount();
  if (mount.empty() || stat((mount + ThisCgroup()).c_str(), &directory) != 0) return 1;
  return directory.st_ino;
}

// Moves this process into a new group below its own until destroyed, so that
// its id is not the root's, which a constant would match. Where there is no
// hierarchy to write (not root, not mounted) the process stays where it is.
class InFreshCgroup {
 public:
  InFreshCgroup() : mount_(CgroupMount()), home_(ThisCgroup()) {
    if (mount_.empty()) return;
    std::string group = mount_ + home_ + (home_ == "/" ? "" : "/") + "pystrobe-identity-" +
                        std::to_string(getpid());
    if (mkdir(group.c_str(), 0755) != 0) return;
    fresh_ = group;
    std::ofstream(fresh_ + "/cgroup.procs") << getpid() << std::endl;
  }
  ~InFreshCgroup() {
    if (fresh_.empty()) return;
    std::ofstream(mount_ + home_ + "/cgroup.procs") << getpid() << std::endl;
    rmdir(fresh_.c_str());
  }

 private:
  std::string mount_, home_, fresh_;
};

// Sets the calling thread's name until destroyed.
class ThreadNamed {
 public:
  explicit ThreadNamed(const char* name) {
    prctl(PR_GET_NAME, saved_);
    prctl(PR_SET_NAME, name);
  }
  ~ThreadNamed() { prctl(PR_SET_NAME, saved_); }

 private:
  char saved_[16] = {};
};

TEST(SampleIdentityTest, ASampleNamesItsProcessThreadNameAndCgroup) {
  std::unique_ptr<ThreadSampler> sampler;
  StartSamplerOrSkip({}, &sampler);
  if (!sampler) return;
  // A shorter name after a longer one: the record's name ends where the
  // shorter one does.
  ThreadNamed longer("identity-longer");
  ThreadNamed name("identity");
  InFreshCgroup cgroup;

  absl::StatusOr<std::vector<SampleRecord>> samples = sampler->SampleStacks(1);

  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 1u);
  const SampleRecord& sample = samples->front();
  EXPECT_EQ(sample.pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(sample.tid, static_cast<uint32_t>(syscall(SYS_gettid)));
  EXPECT_EQ(sample.comm, "identity");
  EXPECT_EQ(sample.cgroup_id, ThisCgroupId());
}

TEST(SampleIdentityTest, AProcessMadeATargetAfterItsSamplesWereFilteredIsSampledAtItsNext) {
  std::unique_ptr<ThreadSampler> sampler;
  StartSamplerOrSkip({}, &sampler, /*target_this_process=*/false);
  if (!sampler) return;
  PinnedToThisCpu pinned;
  uint64_t filtered_before = sampler->counters().filtered;

  absl::StatusOr<std::vector<SampleRecord>> outside = sampler->SampleStacks(2);
  ASSERT_TRUE(outside.ok()) << outside.status();
  EXPECT_TRUE(outside->empty());
  EXPECT_EQ(sampler->counters().filtered - filtered_before, 2u);

  ASSERT_TRUE(sampler->sampler().AddTargetPid(static_cast<uint32_t>(getpid())).ok());
  absl::StatusOr<std::vector<SampleRecord>> inside = sampler->SampleStacks(1);

  ASSERT_TRUE(inside.ok()) << inside.status();
  ASSERT_EQ(inside->size(), 1u);
  EXPECT_EQ(inside->front().pid, static_cast<uint32_t>(getpid()));
}

}  // namespace
}  // namespace pystrobe::bpf_test

// Containers against real kernel objects, as root: cgroup v2 groups this test
// creates under the cgroup2 mount (pystrobe-test-<pid>/...), processes moved
// into them, and PID namespaces made with `unshare --pid --fork --mount-proc`.
// No BPF is loaded. Without root every test is skipped, saying why.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/containers/cgroup_resolver.h"
#include "daemon/containers/container_id.h"
#include "daemon/containers/pid_namespace.h"
#include "daemon/containers/process_container_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace pystrobe {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;

constexpr char kContainerId[] = "0d15ea5e0d15ea5e0d15ea5e0d15ea5e0d15ea5e0d15ea5e0d15ea5e0d15ea5e";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Starts argv[0] (searched in PATH); returns its pid, or -1.
pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  return pid;
}

void KillAndReap(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// The kernfs id of a cgroup directory through its file handle: the value
// bpf_get_current_cgroup_id() returns for tasks in it, found independently of
// the resolver's stat().
uint64_t KernfsIdByHandle(const std::string& dir) {
  struct {
    struct file_handle handle;
    uint64_t id;
  } h;
  h.handle.handle_bytes = sizeof(uint64_t);
  int mount_id;
  if (name_to_handle_at(AT_FDCWD, dir.c_str(), &h.handle, &mount_id, 0) != 0) return 0;
  uint64_t id;
  memcpy(&id, h.handle.f_handle, sizeof(id));
  return id;
}

// A child of `pid` (unshare's forked child), polling until it appears.
pid_t WaitForChild(pid_t parent) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    for (absl::string_view word :
         absl::StrSplit(ReadFile(absl::StrCat("/proc/", parent, "/task/", parent, "/children")),
                        ' ', absl::SkipEmpty())) {
      pid_t child;
      if (absl::SimpleAtoi(word, &child)) {
        // Wait until it has exec'ed sleep, so NSpid and cgroup are final.
        if (ReadFile(absl::StrCat("/proc/", child, "/comm")) == "sleep\n") return child;
      }
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return -1;
}

class ContainersRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "needs root: creates cgroup v2 groups and moves processes into them";
    }
    absl::StatusOr<std::string> mount = FindCgroup2MountOfThisHost();
    ASSERT_TRUE(mount.ok()) << mount.status();
    mount_ = *mount;
    parent_ = absl::StrCat("/pystrobe-test-", getpid());
    child_ = parent_ + "/child";
    grandchild_ = child_ + "/grandchild";
    scope_ = absl::StrCat(parent_, "/docker-", kContainerId, ".scope");
    for (const std::string& group : {parent_, child_, grandchild_, scope_}) {
      ASSERT_EQ(mkdir((mount_ + group).c_str(), 0755), 0)
          << mount_ + group << ": " << strerror(errno);
      created_.push_back(group);
    }
  }

  void TearDown() override {
    for (pid_t pid : processes_) KillAndReap(pid);
    // Deepest first; a group empties a moment after its last task is reaped.
    std::sort(created_.begin(), created_.end(),
              [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    for (const std::string& group : created_) {
      std::string dir = mount_ + group;
      for (int attempt = 0; attempt < 50 && rmdir(dir.c_str()) != 0 && errno == EBUSY; ++attempt) {
        absl::SleepFor(absl::Milliseconds(20));
      }
      struct stat st;
      EXPECT_NE(stat(dir.c_str(), &st), 0) << "left behind: " << dir;
    }
  }

  pid_t StartSleep() {
    pid_t pid = Spawn({"sleep", "30"});
    if (pid > 0) processes_.push_back(pid);
    return pid;
  }

  void MoveInto(pid_t pid, const std::string& group) {
    std::ofstream procs(mount_ + group + "/cgroup.procs");
    procs << pid << std::endl;
    ASSERT_TRUE(procs.good()) << "moving " << pid << " into " << group;
  }

  uint64_t InodeOf(const std::string& group) {
    struct stat st;
    EXPECT_EQ(stat((mount_ + group).c_str(), &st), 0) << group;
    return st.st_ino;
  }

  std::string mount_, parent_, child_, grandchild_, scope_;
  std::vector<std::string> created_;
  std::vector<pid_t> processes_;
};

TEST_F(ContainersRootTest, ProcessMovedIntoAGroupIsFoundThroughProcCgroup) {
  pid_t pid = StartSleep();
  ASSERT_GT(pid, 0);
  MoveInto(pid, child_);
  std::vector<ProcCgroupEntry> entries =
      ParseProcCgroup(ReadFile(absl::StrCat("/proc/", pid, "/cgroup")));
  EXPECT_EQ(UnifiedCgroupPath(entries), child_);
  absl::StatusOr<ProcessContainerInfo> info = ReadProcessContainerInfo(pid);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->cgroup_path, child_);
  EXPECT_FALSE(info->container.in_container());
  EXPECT_EQ(info->pid_namespace.ns_pid, pid);
  EXPECT_FALSE(info->pid_namespace.in_child_namespace());
}

TEST_F(ContainersRootTest, IdsAndPathsResolveBothWaysByHandleAndByWalk) {
  for (bool use_file_handles : {true, false}) {
    SCOPED_TRACE(use_file_handles ? "by file handle" : "by walking the tree");
    CgroupResolver::Options options;
    options.use_file_handles = use_file_handles;
    options.min_rescan_interval = absl::ZeroDuration();
    absl::StatusOr<std::unique_ptr<CgroupResolver>> resolver = CgroupResolver::Create(options);
    ASSERT_TRUE(resolver.ok()) << resolver.status();
    CgroupResolver& r = **resolver;
    EXPECT_EQ(r.mount(), mount_);

    // A group made after the resolver's first walk: a miss that must be found.
    std::string late = parent_ + (use_file_handles ? "/late-handle" : "/late-walk");
    ASSERT_EQ(mkdir((mount_ + late).c_str(), 0755), 0) << strerror(errno);
    created_.push_back(late);
    uint64_t late_id = KernfsIdByHandle(mount_ + late);
    ASSERT_NE(late_id, 0u);
    EXPECT_EQ(late_id, InodeOf(late)) << "the kernfs id is the inode number on 64-bit";
    absl::StatusOr<std::string> path = r.PathForId(late_id);
    ASSERT_TRUE(path.ok()) << path.status();
    EXPECT_EQ(*path, late);
    CgroupResolver::Stats stats = r.stats();
    EXPECT_EQ(stats.misses, 1u);
    if (use_file_handles) {
      EXPECT_EQ(stats.handle_lookups, 1u) << "root has CAP_DAC_READ_SEARCH";
      EXPECT_EQ(stats.rescans, 1u);
    } else {
      EXPECT_EQ(stats.rescans, 2u);
    }
    // A second lookup is a cache hit.
    EXPECT_EQ(*r.PathForId(late_id), late);
    EXPECT_EQ(r.stats().hits, 1u);

    for (const std::string& group : {parent_, child_, grandchild_, scope_}) {
      absl::StatusOr<uint64_t> id = r.IdForPath(group);
      ASSERT_TRUE(id.ok()) << id.status();
      EXPECT_EQ(*id, KernfsIdByHandle(mount_ + group)) << group;
      EXPECT_EQ(*r.PathForId(*id), group);
    }
  }
}

TEST_F(ContainersRootTest, DescendantIdsCoverTheSubtreeParentFirst) {
  absl::StatusOr<std::unique_ptr<CgroupResolver>> resolver = CgroupResolver::Create({});
  ASSERT_TRUE(resolver.ok()) << resolver.status();
  absl::StatusOr<std::vector<uint64_t>> ids = (*resolver)->DescendantIds(parent_, 100);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->size(), 4u);
  EXPECT_EQ(ids->front(), InodeOf(parent_));
  for (const std::string& group : {child_, grandchild_, scope_}) {
    EXPECT_THAT(*ids, Contains(InodeOf(group))) << group;
  }
  EXPECT_THAT(*(*resolver)->DescendantIds(child_, 100),
              ElementsAre(InodeOf(child_), InodeOf(grandchild_)));
  EXPECT_THAT(*(*resolver)->DescendantIds(mount_ + grandchild_, 1),
              ElementsAre(InodeOf(grandchild_)));
  EXPECT_EQ((*resolver)->DescendantIds(parent_, 3).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ((*resolver)->DescendantIds(parent_ + "/missing", 10).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ContainersRootTest, RemovedGroupKeepsItsCachedPathAndIsUnknownToAFreshResolver) {
  absl::StatusOr<std::unique_ptr<CgroupResolver>> resolver = CgroupResolver::Create({});
  ASSERT_TRUE(resolver.ok()) << resolver.status();
  uint64_t id = InodeOf(grandchild_);
  EXPECT_EQ(*(*resolver)->PathForId(id), grandchild_);
  ASSERT_EQ(rmdir((mount_ + grandchild_).c_str()), 0) << strerror(errno);
  EXPECT_EQ(*(*resolver)->PathForId(id), grandchild_)
      << "samples taken before the removal still name the group";
  absl::StatusOr<std::unique_ptr<CgroupResolver>> fresh = CgroupResolver::Create({});
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->PathForId(id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ContainersRootTest, PidNamespaceGivesPidOneInside) {
  pid_t unshare = Spawn({"unshare", "--pid", "--fork", "--mount-proc", "sleep", "30"});
  ASSERT_GT(unshare, 0) << "cannot run unshare";
  processes_.push_back(unshare);
  pid_t sleeper = WaitForChild(unshare);
  ASSERT_GT(sleeper, 0) << "unshare's child did not appear";
  processes_.insert(processes_.begin(), sleeper);  // kill the namespace's init first

  absl::StatusOr<PidNamespaceInfo> ns = ReadPidNamespaceInfo(sleeper);
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_THAT(ns->ns_pids, ElementsAre(sleeper, 1));
  EXPECT_EQ(ns->ns_pid, 1);
  EXPECT_TRUE(ns->in_child_namespace());
  absl::StatusOr<PidNamespaceInfo> self = ReadPidNamespaceInfo(getpid());
  ASSERT_TRUE(self.ok());
  EXPECT_NE(ns->pid_ns_inode, 0u);
  EXPECT_NE(ns->pid_ns_inode, self->pid_ns_inode);
  EXPECT_FALSE(self->in_child_namespace());
  // Its files, read through /proc/PID/root, are its mount namespace's: there
  // the /proc of --mount-proc shows it as pid 1.
  EXPECT_EQ(ReadFile(PathInProcessRoot(sleeper, "/proc/1/comm")), "sleep\n");
}

TEST_F(ContainersRootTest, ContainerLikeProcessHasContainerIdAndNamespacePid) {
  pid_t unshare = Spawn({"unshare", "--pid", "--fork", "--mount-proc", "sleep", "30"});
  ASSERT_GT(unshare, 0);
  processes_.push_back(unshare);
  pid_t sleeper = WaitForChild(unshare);
  ASSERT_GT(sleeper, 0);
  processes_.insert(processes_.begin(), sleeper);
  MoveInto(sleeper, scope_);

  absl::StatusOr<ProcessContainerInfo> info = ReadProcessContainerInfo(sleeper);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->cgroup_path, scope_);
  EXPECT_EQ(info->container.runtime, ContainerRuntime::kDocker);
  EXPECT_EQ(info->container.id, kContainerId);
  EXPECT_EQ(info->container.short_id, std::string(kContainerId).substr(0, 12));
  EXPECT_EQ(info->pid_namespace.ns_pid, 1);
  EXPECT_EQ(info->pid_namespace.pid, sleeper);

  absl::StatusOr<std::unique_ptr<CgroupResolver>> resolver = CgroupResolver::Create({});
  ASSERT_TRUE(resolver.ok());
  absl::StatusOr<std::string> path = (*resolver)->PathForId(InodeOf(scope_));
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(ParseContainerInfo(*path).id, kContainerId)
      << "a sample's cgroup id leads to the container id";
}

}  // namespace
}  // namespace pystrobe

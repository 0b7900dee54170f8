// Container ids, pod UIDs and systemd units from real-world cgroup paths and
// /proc/PID/cgroup files; cgroup2 mounts from mountinfo; NSpid lines; and a
// process read from a fake /proc tree. No root needed.
#include "daemon/containers/container_id.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/containers/cgroup_resolver.h"
#include "daemon/containers/pid_namespace.h"
#include "daemon/containers/process_container_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::ElementsAre;

constexpr char kId[] = "3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e";
constexpr char kShort[] = "3f4e5d6c7b8a";
constexpr char kInnerId[] = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90";
constexpr char kPodUid[] = "8d3b9f2e-1c4a-4e6b-9a7d-2f5c8e1b0a93";
constexpr char kPodUidEscaped[] = "8d3b9f2e_1c4a_4e6b_9a7d_2f5c8e1b0a93";

std::string Path(absl::string_view a, absl::string_view b = "", absl::string_view c = "") {
  return absl::StrCat(a, b, c);
}

TEST(ParseContainerInfoTest, DockerCgroupfsDriver) {
  ContainerInfo info = ParseContainerInfo(Path("/docker/", kId));
  EXPECT_EQ(info.runtime, ContainerRuntime::kDocker);
  EXPECT_EQ(info.id, kId);
  EXPECT_EQ(info.short_id, kShort);
  EXPECT_EQ(info.pod_uid, "");
  EXPECT_EQ(info.systemd_unit, "");
  EXPECT_EQ(info.Identity(), kShort);
  EXPECT_EQ(ContainerRuntimeName(info.runtime), "docker");
}

TEST(ParseContainerInfoTest, DockerSystemdDriver) {
  ContainerInfo info = ParseContainerInfo(Path("/system.slice/docker-", kId, ".scope"));
  EXPECT_EQ(info.runtime, ContainerRuntime::kDocker);
  EXPECT_EQ(info.id, kId);
  EXPECT_EQ(info.systemd_unit, Path("docker-", kId, ".scope"));
}

TEST(ParseContainerInfoTest, DockerInDockerReportsTheInnerContainer) {
  ContainerInfo info = ParseContainerInfo(Path("/docker/", kId, Path("/docker/", kInnerId)));
  EXPECT_EQ(info.runtime, ContainerRuntime::kDocker);
  EXPECT_EQ(info.id, kInnerId);
}

TEST(ParseContainerInfoTest, ContainerdUnderKubernetesSystemdDriver) {
  ContainerInfo info =
      ParseContainerInfo(Path("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod",
                              kPodUidEscaped, Path(".slice/cri-containerd-", kId, ".scope")));
  EXPECT_EQ(info.runtime, ContainerRuntime::kContainerd);
  EXPECT_EQ(ContainerRuntimeName(info.runtime), "containerd");
  EXPECT_EQ(info.id, kId);
  EXPECT_EQ(info.pod_uid, kPodUid);
  EXPECT_EQ(info.systemd_unit, Path("cri-containerd-", kId, ".scope"));
}

TEST(ParseContainerInfoTest, GuaranteedPodHasNoQosSlice) {
  ContainerInfo info = ParseContainerInfo(Path("/kubepods.slice/kubepods-pod", kPodUidEscaped,
                                               Path(".slice/cri-containerd-", kId, ".scope")));
  EXPECT_EQ(info.pod_uid, kPodUid);
  EXPECT_EQ(info.id, kId);
}

TEST(ParseContainerInfoTest, KubernetesCgroupfsDriverNamesNoRuntime) {
  ContainerInfo info = ParseContainerInfo(Path("/kubepods/burstable/pod", kPodUid, Path("/", kId)));
  EXPECT_EQ(info.runtime, ContainerRuntime::kCri);
  EXPECT_EQ(ContainerRuntimeName(info.runtime), "cri");
  EXPECT_EQ(info.id, kId);
  EXPECT_EQ(info.pod_uid, kPodUid);

  info = ParseContainerInfo(Path("/kubepods/pod", kPodUid, Path("/", kId)));
  EXPECT_EQ(info.pod_uid, kPodUid);
  EXPECT_EQ(info.id, kId);
}

TEST(ParseContainerInfoTest, PodCgroupItselfHasAPodButNoContainer) {
  ContainerInfo info =
      ParseContainerInfo(Path("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod",
                              kPodUidEscaped, ".slice"));
  EXPECT_EQ(info.pod_uid, kPodUid);
  EXPECT_FALSE(info.in_container());
  EXPECT_EQ(info.runtime, ContainerRuntime::kNone);
}

TEST(ParseContainerInfoTest, StaticPodUidIsAHashWithoutDashes) {
  ContainerInfo info =
      ParseContainerInfo(Path("/kubepods/burstable/pod6a1e7b43c1ad6a1f3c6c1b7b3a5e2f1c/", kId));
  EXPECT_EQ(info.pod_uid, "6a1e7b43c1ad6a1f3c6c1b7b3a5e2f1c");
}

TEST(ParseContainerInfoTest, CrioSystemdAndCgroupfs) {
  ContainerInfo info =
      ParseContainerInfo(Path("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod",
                              kPodUidEscaped, Path(".slice/crio-", kId, ".scope")));
  EXPECT_EQ(info.runtime, ContainerRuntime::kCrio);
  EXPECT_EQ(ContainerRuntimeName(info.runtime), "cri-o");
  EXPECT_EQ(info.id, kId);
  EXPECT_EQ(info.pod_uid, kPodUid);

  info = ParseContainerInfo(Path("/kubepods/besteffort/pod", kPodUid, Path("/crio-", kId)));
  EXPECT_EQ(info.runtime, ContainerRuntime::kCrio);
  EXPECT_EQ(info.id, kId);
}

TEST(ParseContainerInfoTest, ConmonScopesAreNotContainers) {
  ContainerInfo info = ParseContainerInfo(Path("/machine.slice/libpod-conmon-", kId, ".scope"));
  EXPECT_FALSE(info.in_container());
  EXPECT_EQ(info.systemd_unit, Path("libpod-conmon-", kId, ".scope"));
  info = ParseContainerInfo(Path("/kubepods.slice/crio-conmon-", kId, ".scope"));
  EXPECT_FALSE(info.in_container());
}

TEST(ParseContainerInfoTest, PodmanRootfulRootlessAndNested) {
  ContainerInfo info = ParseContainerInfo(Path("/machine.slice/libpod-", kId, ".scope"));
  EXPECT_EQ(info.runtime, ContainerRuntime::kPodman);
  EXPECT_EQ(info.id, kId);

  info = ParseContainerInfo(
      Path("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-", kId, ".scope"));
  EXPECT_EQ(info.runtime, ContainerRuntime::kPodman);
  EXPECT_EQ(info.id, kId);

  // systemd inside the container moves itself into a child group.
  info = ParseContainerInfo(Path("/machine.slice/libpod-", kId, ".scope/container"));
  EXPECT_EQ(info.runtime, ContainerRuntime::kPodman);
  EXPECT_EQ(info.id, kId);
}

TEST(ParseContainerInfoTest, SystemdServiceIsAServiceIdentity) {
  ContainerInfo info = ParseContainerInfo("/system.slice/nginx.service");
  EXPECT_FALSE(info.in_container());
  EXPECT_EQ(info.runtime, ContainerRuntime::kNone);
  EXPECT_EQ(info.systemd_unit, "nginx.service");
  EXPECT_EQ(info.Identity(), "nginx.service");

  info = ParseContainerInfo("/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service");
  EXPECT_EQ(info.systemd_unit, "foo.service");
  info = ParseContainerInfo("/user.slice/user-1000.slice/session-3.scope");
  EXPECT_EQ(info.systemd_unit, "session-3.scope");
}

TEST(ParseContainerInfoTest, PlainHostGroupsHaveNothing) {
  for (const char* path : {"/", "", "/init.scope/../", "/user.slice", "/pystrobe-test-1/child"}) {
    ContainerInfo info = ParseContainerInfo(path);
    EXPECT_FALSE(info.in_container()) << path;
    EXPECT_EQ(info.pod_uid, "") << path;
  }
  EXPECT_EQ(ParseContainerInfo("/init.scope").systemd_unit, "init.scope");
}

TEST(ParseContainerInfoTest, UnknownRuntimeHexGroupAndCgroupNamespacePaths) {
  ContainerInfo info = ParseContainerInfo(Path("/default/", kId));  // containerd namespace
  EXPECT_EQ(info.runtime, ContainerRuntime::kUnknown);
  EXPECT_EQ(info.id, kId);
  // Seen from inside a private cgroup namespace.
  info = ParseContainerInfo(Path("/../../kubepods/burstable/pod", kPodUid, Path("/", kId)));
  EXPECT_EQ(info.id, kId);
  EXPECT_EQ(info.pod_uid, kPodUid);
}

TEST(ParseContainerInfoTest, NearMissesAreNotContainers) {
  std::string upper = kId;
  upper[0] = 'F';
  for (const std::string& path :
       {Path("/docker/", std::string(kId).substr(0, 63)), Path("/docker/", upper),
        Path("/system.slice/docker-", std::string(kId) + "0", ".scope"),
        std::string("/system.slice/docker.service")}) {
    EXPECT_FALSE(ParseContainerInfo(path).in_container()) << path;
  }
  EXPECT_EQ(ParseContainerInfo("/system.slice/docker.service").systemd_unit, "docker.service");
}

TEST(ParseProcCgroupTest, HybridHostWithDockerOnlyInV1) {
  std::string text = absl::StrCat("12:pids:/docker/", kId, "\n", "11:memory:/docker/", kId, "\n",
                                  "10:cpu,cpuacct:/docker/", kId, "\n", "1:name=systemd:/docker/",
                                  kId, "\n", "0::/system.slice/containerd.service\n");
  std::vector<ProcCgroupEntry> entries = ParseProcCgroup(text);
  ASSERT_EQ(entries.size(), 5u);
  EXPECT_EQ(entries[2].hierarchy_id, 10);
  EXPECT_EQ(entries[2].controllers, "cpu,cpuacct");
  EXPECT_EQ(UnifiedCgroupPath(entries), "/system.slice/containerd.service");
  ContainerInfo info = ContainerInfoFromProcCgroup(entries);
  EXPECT_EQ(info.runtime, ContainerRuntime::kDocker);
  EXPECT_EQ(info.id, kId);
}

TEST(ParseProcCgroupTest, UnifiedHostUsesTheV2Line) {
  std::vector<ProcCgroupEntry> entries =
      ParseProcCgroup(Path("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod",
                           kPodUidEscaped, Path(".slice/cri-containerd-", kId, ".scope\n")));
  ContainerInfo info = ContainerInfoFromProcCgroup(entries);
  EXPECT_EQ(info.runtime, ContainerRuntime::kContainerd);
  EXPECT_EQ(info.pod_uid, kPodUid);
}

TEST(ParseProcCgroupTest, ServiceNamedOnlyByTheSystemdHierarchy) {
  std::vector<ProcCgroupEntry> entries = ParseProcCgroup(
      "4:memory:/\n"
      "1:name=systemd:/system.slice/ssh.service\n"
      "0::/\n");
  ContainerInfo info = ContainerInfoFromProcCgroup(entries);
  EXPECT_FALSE(info.in_container());
  EXPECT_EQ(info.systemd_unit, "ssh.service");
}

TEST(ParseProcCgroupTest, PathsWithColonsAndMalformedLines) {
  std::vector<ProcCgroupEntry> entries =
      ParseProcCgroup("garbage\nx:cpu:/a\n3:cpu\n0::/a:b/c\n\n5:blkio:\n");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].path, "/a:b/c");
}

TEST(FindCgroup2MountTest, HybridUnifiedAndNone) {
  constexpr char kHybrid[] =
      "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(FindCgroup2Mount(kHybrid), "/sys/fs/cgroup/unified");
  constexpr char kUnified[] =
      "25 30 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
      "rw,nsdelegate,memory_recursiveprot\n";
  EXPECT_EQ(FindCgroup2Mount(kUnified), "/sys/fs/cgroup");
  EXPECT_EQ(FindCgroup2Mount("22 1 0:5 / /dev rw - devtmpfs udev rw\n"), std::nullopt);
  EXPECT_EQ(FindCgroup2Mount("9 1 0:7 / /mnt/my\\040cgroups rw - cgroup2 none rw\n"),
            "/mnt/my cgroups");
}

TEST(ParseNsPidsTest, OutermostFirst) {
  EXPECT_THAT(*ParseNsPids("Name:\tsleep\nPid:\t4242\nNSpid:\t4242\t17\t1\nPPid:\t1\n"),
              ElementsAre(4242, 17, 1));
  EXPECT_THAT(*ParseNsPids("NSpid:\t99\n"), ElementsAre(99));
  EXPECT_EQ(ParseNsPids("Pid:\t1\n").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(ParseNsPids("NSpid:\tx\n").ok());
}

TEST(PathInProcessRootTest, ReadsThroughTheProcessRoot) {
  EXPECT_EQ(PathInProcessRoot(42, "/usr/bin/python3"), "/proc/42/root/usr/bin/python3");
  EXPECT_EQ(PathInProcessRoot(42, "lib/x.so", "/p"), "/p/42/root/lib/x.so");
}

// A /proc tree in a temporary directory, for a containerised process.
class FakeProcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / absl::StrCat("pystrobe-fakeproc-", getpid());
    std::filesystem::create_directories(root_ / "4242" / "ns");
    Write("4242/cgroup", absl::StrCat("0::/system.slice/docker-", kId, ".scope\n"));
    Write("4242/status", "Name:\tpython3\nPid:\t4242\nNSpid:\t4242\t7\nPPid:\t4000\n");
    Write("4242/ns/pid", "");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::string& relative, const std::string& text) {
    std::ofstream(root_ / relative) << text;
  }
  std::filesystem::path root_;
};

TEST_F(FakeProcTest, CombinesCgroupContainerAndNamespacePids) {
  absl::StatusOr<ProcessContainerInfo> info = ReadProcessContainerInfo(4242, root_.string());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->pid, 4242);
  EXPECT_EQ(info->cgroup_path, absl::StrCat("/system.slice/docker-", kId, ".scope"));
  EXPECT_EQ(info->container.runtime, ContainerRuntime::kDocker);
  EXPECT_EQ(info->container.id, kId);
  EXPECT_EQ(info->pid_namespace.ns_pid, 7);
  EXPECT_THAT(info->pid_namespace.ns_pids, ElementsAre(4242, 7));
  EXPECT_TRUE(info->pid_namespace.in_child_namespace());
  EXPECT_NE(info->pid_namespace.pid_ns_inode, 0u);
  EXPECT_EQ(info->root, absl::StrCat(root_.string(), "/4242/root"));
}

TEST_F(FakeProcTest, ExitedProcessIsNotFound) {
  EXPECT_EQ(ReadProcessContainerInfo(4243, root_.string()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ProcessContainerInfoTest, ThisProcess) {
  absl::StatusOr<ProcessContainerInfo> info = ReadProcessContainerInfo(getpid());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->pid_namespace.ns_pids.front(), getpid());
  EXPECT_FALSE(info->cgroup_path.empty()) << "this host has cgroup v2 (PLATFORM.md)";
}

// The resolver only reads the cgroup2 tree here, which needs no privilege.
TEST(CgroupResolverTest, RootGroupAndThisProcessResolveBothWays) {
  absl::StatusOr<std::unique_ptr<CgroupResolver>> resolver = CgroupResolver::Create({});
  ASSERT_TRUE(resolver.ok()) << resolver.status();
  absl::StatusOr<uint64_t> root_id = (*resolver)->IdForPath("/");
  ASSERT_TRUE(root_id.ok()) << root_id.status();
  EXPECT_EQ(*(*resolver)->PathForId(*root_id), "/");
  absl::StatusOr<ProcessContainerInfo> self = ReadProcessContainerInfo(getpid());
  ASSERT_TRUE(self.ok());
  absl::StatusOr<uint64_t> self_id = (*resolver)->IdForPath(self->cgroup_path);
  ASSERT_TRUE(self_id.ok()) << self_id.status();
  EXPECT_EQ(*(*resolver)->PathForId(*self_id), self->cgroup_path);
  // The same group named through the mount.
  EXPECT_EQ(*(*resolver)->IdForPath((*resolver)->mount() + self->cgroup_path), *self_id);
}

TEST(CgroupResolverTest, NormalizeKeepsPathsInsideTheMount) {
  absl::StatusOr<std::unique_ptr<CgroupResolver>> resolver = CgroupResolver::Create({});
  ASSERT_TRUE(resolver.ok()) << resolver.status();
  CgroupResolver& r = **resolver;
  EXPECT_EQ(*r.Normalize("/a//b/"), "/a/b");
  EXPECT_EQ(*r.Normalize(r.mount()), "/");
  EXPECT_EQ(*r.Normalize(r.mount() + "/a/./b"), "/a/b");
  EXPECT_FALSE(r.Normalize("/a/../../etc").ok());
  EXPECT_FALSE(r.Normalize("relative").ok());
  EXPECT_EQ(r.IdForPath("/no-such-group-pystrobe").status().code(), absl::StatusCode::kNotFound);
}

absl::Time fake_now;
absl::Time FakeNow() { return fake_now; }

TEST(CgroupResolverTest, MissesRescanAtMostOncePerInterval) {
  CgroupResolver::Options options;
  options.use_file_handles = false;  // force the walk
  options.min_rescan_interval = absl::Seconds(2);
  options.now = FakeNow;
  fake_now = absl::FromUnixSeconds(1000);
  absl::StatusOr<std::unique_ptr<CgroupResolver>> resolver = CgroupResolver::Create(options);
  ASSERT_TRUE(resolver.ok()) << resolver.status();
  CgroupResolver& r = **resolver;
  const uint64_t kNoSuchId = ~uint64_t{0} - 7;
  EXPECT_EQ(r.stats().rescans, 1u);  // at creation
  EXPECT_EQ(r.PathForId(kNoSuchId).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.PathForId(kNoSuchId).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(r.stats().rescans, 1u);
  EXPECT_EQ(r.stats().rescans_rate_limited, 2u);
  fake_now += absl::Seconds(3);
  EXPECT_FALSE(r.PathForId(kNoSuchId).ok());
  EXPECT_EQ(r.stats().rescans, 2u);
  EXPECT_EQ(r.stats().not_found, 3u);
}

TEST(CgroupResolverTest, CacheIsBounded) {
  CgroupResolver::Options options;
  options.max_entries = 1;
  absl::StatusOr<std::unique_ptr<CgroupResolver>> resolver = CgroupResolver::Create(options);
  ASSERT_TRUE(resolver.ok()) << resolver.status();
  EXPECT_LE((*resolver)->stats().entries, 1u);
  absl::StatusOr<ProcessContainerInfo> self = ReadProcessContainerInfo(getpid());
  ASSERT_TRUE(self.ok());
  ASSERT_TRUE((*resolver)->IdForPath(self->cgroup_path).ok());
  ASSERT_TRUE((*resolver)->IdForPath("/").ok());
  EXPECT_EQ((*resolver)->stats().entries, 1u);
}

}  // namespace
}  // namespace pystrobe

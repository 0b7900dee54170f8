// Which container (or systemd unit, or Kubernetes pod) a cgroup path belongs
// to, from the names container runtimes and systemd give their cgroups.
//
// Recognised (the innermost container wins, so Docker in Docker reports the
// inner one):
//   Docker      /docker/<64hex> (cgroupfs driver), docker-<64hex>.scope (systemd)
//   containerd  cri-containerd-<64hex>.scope
//   CRI-O       crio-<64hex>.scope, crio-<64hex>
//   Podman      libpod-<64hex>.scope (and its nested .../container)
//   Kubernetes  /kubepods/<qos>/pod<uid>/<64hex> (cgroupfs driver: the runtime
//               is not in the path, so kCri), kubepods-<qos>-pod<uid_>.slice
//               (systemd driver, the UID's dashes escaped as '_')
//   systemd     the innermost *.service or *.scope component, as a unit name
// A 64-hex component under none of these is a container of kUnknown runtime.
// The "conmon" scopes of Podman and CRI-O (libpod-conmon-<id>.scope,
// crio-conmon-<id>.scope) hold the container monitor, not the container: they
// count as systemd units only.
#ifndef PYSTROBE_DAEMON_CONTAINERS_CONTAINER_ID_H_
#define PYSTROBE_DAEMON_CONTAINERS_CONTAINER_ID_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace pystrobe {

enum class ContainerRuntime {
  kNone,  // not in a container
  kDocker,
  kContainerd,  // cri-containerd-<id>.scope
  kCrio,
  kPodman,
  kCri,      // a Kubernetes container whose path does not name the runtime
  kUnknown,  // a 64-hex cgroup name under no known runtime
};

// "docker", "containerd", "cri-o", "podman", "cri", "unknown", "" for kNone.
absl::string_view ContainerRuntimeName(ContainerRuntime runtime);

struct ContainerInfo {
  ContainerRuntime runtime = ContainerRuntime::kNone;
  std::string id;            // 64 lowercase hex characters; empty when not a container
  std::string short_id;      // the first 12, as `docker ps` shows
  std::string pod_uid;       // Kubernetes pod UID with dashes, when the path has it
  std::string systemd_unit;  // innermost *.service / *.scope, e.g. "nginx.service"

  bool in_container() const { return !id.empty(); }
  // What to call the workload in a label: the short container id, else the
  // systemd unit, else "".
  std::string Identity() const;

  friend bool operator==(const ContainerInfo&, const ContainerInfo&) = default;
};

// From a cgroup path ("/system.slice/docker-<id>.scope"). Paths relative to a
// cgroup namespace ("/../../kubepods/...") work too: ".." components are skipped.
ContainerInfo ParseContainerInfo(absl::string_view cgroup_path);

// One line of /proc/PID/cgroup: "hierarchy-id:controllers:path".
struct ProcCgroupEntry {
  int hierarchy_id = 0;     // 0 for the cgroup v2 (unified) line
  std::string controllers;  // "" on the v2 line; "memory", "cpu,cpuacct", "name=systemd"
  std::string path;

  friend bool operator==(const ProcCgroupEntry&, const ProcCgroupEntry&) = default;
};

// Every well-formed line of a /proc/PID/cgroup file; malformed lines are skipped.
std::vector<ProcCgroupEntry> ParseProcCgroup(absl::string_view text);

// The cgroup v2 path ("0::/path" line), if the file has one.
std::optional<std::string> UnifiedCgroupPath(const std::vector<ProcCgroupEntry>& entries);

// The container of a process from its /proc/PID/cgroup lines: the v2 path
// first; on hybrid or v1 hosts, where runtimes may only set up v1 hierarchies,
// the first v1 line (name=systemd first, then memory, then any) that names a
// container. Pod UID and systemd unit come from the same line as the container.
ContainerInfo ContainerInfoFromProcCgroup(const std::vector<ProcCgroupEntry>& entries);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CONTAINERS_CONTAINER_ID_H_

// Labels of where a process runs, from its cgroup: the cgroup v2 path and the
// container (or pod, or systemd unit) it names. Cached per cgroup id, bounded.
#ifndef PYSTROBE_DAEMON_SERVICE_CONTAINER_LABELS_H_
#define PYSTROBE_DAEMON_SERVICE_CONTAINER_LABELS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/containers/cgroup_resolver.h"
#include "daemon/containers/container_id.h"
#include "model/profile.h"

namespace pystrobe {

class ContainerLabels {
 public:
  // `resolver` may be null (no cgroup v2 here): then there are no labels.
  explicit ContainerLabels(std::unique_ptr<CgroupResolver> resolver, size_t max_entries = 4096)
      : resolver_(std::move(resolver)), max_entries_(max_entries) {}

  // cgroup, container_id, pod_uid, systemd_unit: those that are known.
  std::vector<ProfileLabel> ForCgroup(uint64_t cgroup_id);

  CgroupResolver* resolver() { return resolver_.get(); }

 private:
  std::unique_ptr<CgroupResolver> resolver_;
  size_t max_entries_;
  absl::flat_hash_map<uint64_t, std::vector<ProfileLabel>> cache_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_CONTAINER_LABELS_H_

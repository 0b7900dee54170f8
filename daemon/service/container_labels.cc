#include "daemon/service/container_labels.h"

namespace pystrobe {

std::vector<ProfileLabel> ContainerLabels::ForCgroup(uint64_t cgroup_id) {
  if (resolver_ == nullptr || cgroup_id == 0) return {};
  if (auto it = cache_.find(cgroup_id); it != cache_.end()) return it->second;
  absl::StatusOr<std::string> path = resolver_->PathForId(cgroup_id);
  std::vector<ProfileLabel> labels;
  if (path.ok()) {
    labels.push_back({"cgroup", *path});
    ContainerInfo container = ParseContainerInfo(*path);
    if (container.in_container()) labels.push_back({"container_id", container.id});
    if (!container.pod_uid.empty()) labels.push_back({"pod_uid", container.pod_uid});
    if (!container.systemd_unit.empty()) {
      labels.push_back({"systemd_unit", container.systemd_unit});
    }
  }
  // Bounded: a host that makes and removes groups all day refills it.
  if (cache_.size() >= max_entries_) cache_.clear();
  cache_.emplace(cgroup_id, labels);
  return labels;
}

}  // namespace pystrobe

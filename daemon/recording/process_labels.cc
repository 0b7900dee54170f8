#include "daemon/recording/process_labels.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace pystrobe {

std::vector<ProfileLabel> ProcessImageLabels(const ProcessImage& image) {
  std::vector<ProfileLabel> labels;
  if (image.python != nullptr) {
    labels.push_back({"python_version", image.python->interpreter().version.ToString()});
  }
  if (image.pid_in_namespace != 0) {
    labels.push_back({kPidInNamespaceLabel, absl::StrCat(image.pid_in_namespace)});
  }
  return labels;
}

void AddProcessLabels(const ProcessTable& processes,
                      std::initializer_list<const StackAggregator*> stacks, Profile& profile,
                      const std::function<std::vector<ProfileLabel>(const ProcessImage&)>& first) {
  absl::flat_hash_set<ImageId> images;
  for (const StackAggregator* aggregator : stacks) {
    for (const auto& [stack, weight] : aggregator->weights()) images.insert(stack.image);
  }
  for (ImageId id : images) {
    const ProcessImage& image = processes.image(id);
    std::vector<ProfileLabel>& labels = profile.process_labels[image.pid];
    if (!labels.empty()) continue;
    if (first) labels = first(image);
    std::vector<ProfileLabel> own = ProcessImageLabels(image);
    labels.insert(labels.end(), own.begin(), own.end());
  }
}

}  // namespace pystrobe

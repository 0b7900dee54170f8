#include "daemon/recording/stack_aggregator.h"

namespace pystrobe {

StackAggregator StackAggregator::Since(const StackAggregator& earlier) const {
  StackAggregator gained;
  for (const auto& [stack, now] : weights_) {
    auto before = earlier.weights_.find(stack);
    StackWeight old = before == earlier.weights_.end() ? StackWeight{} : before->second;
    if (now.samples <= old.samples) continue;
    gained.Add(stack, {now.samples - old.samples,
                       now.nanoseconds > old.nanoseconds ? now.nanoseconds - old.nanoseconds : 0});
  }
  return gained;
}

}  // namespace pystrobe

#include "daemon/service/metrics_snapshot.h"

#include <utility>

namespace pystrobe {

void MetricsSnapshot::Publish(const std::string& producer,
                              std::vector<prometheus::MetricFamily> families) {
  absl::MutexLock lock(&mu_);
  families_[producer] = std::move(families);
}

std::vector<prometheus::MetricFamily> MetricsSnapshot::Collect() const {
  std::function<void()> request;
  uint64_t seen = 0;
  absl::Duration wait;
  {
    absl::MutexLock lock(&mu_);
    request = request_refresh_;
    seen = fresh_generation_;
    wait = refresh_wait_;
    refresh_requested_ = request != nullptr;
  }
  if (request) request();
  absl::MutexLock lock(&mu_);
  if (request) {
    auto fresh = [this, seen]()
                     ABSL_SHARED_LOCKS_REQUIRED(mu_) { return fresh_generation_ > seen; };
    mu_.AwaitWithTimeout(absl::Condition(&fresh), wait);
  }
  std::vector<prometheus::MetricFamily> all;
  for (const auto& [producer, families] : families_) {
    all.insert(all.end(), families.begin(), families.end());
  }
  return all;
}

void MetricsSnapshot::set_refresh(std::function<void()> request, absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  request_refresh_ = std::move(request);
  refresh_wait_ = wait;
}

bool MetricsSnapshot::TakeRefreshRequest() {
  absl::MutexLock lock(&mu_);
  return std::exchange(refresh_requested_, false);
}

void MetricsSnapshot::MarkFresh() {
  absl::MutexLock lock(&mu_);
  ++fresh_generation_;
}

prometheus::MetricFamily CounterFamily(std::string name, std::string help) {
  return prometheus::MetricFamily{
      std::move(name), std::move(help), prometheus::MetricType::Counter, {}};
}

prometheus::MetricFamily GaugeFamily(std::string name, std::string help) {
  return prometheus::MetricFamily{
      std::move(name), std::move(help), prometheus::MetricType::Gauge, {}};
}

void AddSample(prometheus::MetricFamily& family, double value,
               std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  if (family.type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
}

}  // namespace pystrobe

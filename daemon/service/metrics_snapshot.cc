#include "daemon/service/metrics_snapshot.h"

#include <utility>

namespace pystrobe {

void MetricsSnapshot::Publish(const std::string& producer,
                              std::vector<prometheus::MetricFamily> families) {
  absl::MutexLock lock(&mu_);
  families_[producer] = std::move(families);
}

std::vector<prometheus::MetricFamily> MetricsSnapshot::Collect() const {
  absl::MutexLock lock(&mu_);
  std::vector<prometheus::MetricFamily> all;
  for (const auto& [producer, families] : families_) {
    all.insert(all.end(), families.begin(), families.end());
  }
  return all;
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

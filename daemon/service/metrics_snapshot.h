// What /metrics serves: metric families published whole by their producers
// (process metrics, the daemon's own health) and read by prometheus-cpp's
// exposer on its own thread at each scrape. A producer replaces its part at
// once, so a scrape never sees half an update, and counters can carry values
// that were counted elsewhere (the kernel, the accounting maps).
#ifndef PYSTROBE_DAEMON_SERVICE_METRICS_SNAPSHOT_H_
#define PYSTROBE_DAEMON_SERVICE_METRICS_SNAPSHOT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace pystrobe {

class MetricsSnapshot : public prometheus::Collectable {
 public:
  // Replaces everything `producer` published before.
  void Publish(const std::string& producer, std::vector<prometheus::MetricFamily> families);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::vector<prometheus::MetricFamily>> families_ ABSL_GUARDED_BY(mu_);
};

// Helpers for building families.
prometheus::MetricFamily CounterFamily(std::string name, std::string help);
prometheus::MetricFamily GaugeFamily(std::string name, std::string help);
// Adds one series; `labels` are name/value pairs.
void AddSample(prometheus::MetricFamily& family, double value,
               std::vector<prometheus::ClientMetric::Label> labels = {});

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_METRICS_SNAPSHOT_H_

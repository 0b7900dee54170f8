// What /metrics serves: metric families published whole by their producers
// (process metrics, the daemon's own health) and read by prometheus-cpp's
// exposer on its own thread at each scrape. A producer replaces its part at
// once, so a scrape never sees half an update, and counters can carry values
// that were counted elsewhere (the kernel, the accounting maps).
#ifndef PYSTROBE_DAEMON_SERVICE_METRICS_SNAPSHOT_H_
#define PYSTROBE_DAEMON_SERVICE_METRICS_SNAPSHOT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace pystrobe {

class MetricsSnapshot : public prometheus::Collectable {
 public:
  // Replaces everything `producer` published before.
  void Publish(const std::string& producer, std::vector<prometheus::MetricFamily> families);
  std::vector<prometheus::MetricFamily> Collect() const override;

  // Figures made when a scrape asks for them rather than every second: an
  // always-on daemon that nobody scrapes then builds no metrics at all. Each
  // scrape calls `request` (from the HTTP server's thread: it must be quick and
  // thread-safe, such as waking the daemon's loop) and waits up to `wait`
  // for MarkFresh(); past that it serves what was published last.
  void set_refresh(std::function<void()> request, absl::Duration wait);
  // True once for each scrape that asked since the last call.
  bool TakeRefreshRequest();
  // What the producers published since the request is complete.
  void MarkFresh();

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::vector<prometheus::MetricFamily>> families_ ABSL_GUARDED_BY(mu_);
  std::function<void()> request_refresh_ ABSL_GUARDED_BY(mu_);
  absl::Duration refresh_wait_ ABSL_GUARDED_BY(mu_);
  mutable bool refresh_requested_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t fresh_generation_ ABSL_GUARDED_BY(mu_) = 0;
};

// Helpers for building families.
prometheus::MetricFamily CounterFamily(std::string name, std::string help);
prometheus::MetricFamily GaugeFamily(std::string name, std::string help);
// Adds one series; `labels` are name/value pairs.
void AddSample(prometheus::MetricFamily& family, double value,
               std::vector<prometheus::ClientMetric::Label> labels = {});

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SERVICE_METRICS_SNAPSHOT_H_

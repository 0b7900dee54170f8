// Scrapes ask for fresh figures and wait for them, a bounded time.
#include "daemon/service/metrics_snapshot.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace pystrobe {
namespace {

std::vector<prometheus::MetricFamily> OneGauge(double value) {
  prometheus::MetricFamily family = GaugeFamily("pystrobe_test_value", "a test value");
  AddSample(family, value);
  return {family};
}

double ValueOf(const std::vector<prometheus::MetricFamily>& families) {
  return families.at(0).metric.at(0).gauge.value;
}

TEST(MetricsSnapshotTest, WithoutRefreshAScrapeReadsWhatWasPublished) {
  MetricsSnapshot snapshot;
  snapshot.Publish("test", OneGauge(1));
  EXPECT_EQ(ValueOf(snapshot.Collect()), 1);
  EXPECT_FALSE(snapshot.TakeRefreshRequest());
}

// The daemon's loop, played by a thread: woken by the scrape, it publishes
// the figures of now and marks them fresh; the scrape returns those.
TEST(MetricsSnapshotTest, AScrapeGetsTheFiguresItAskedFor) {
  MetricsSnapshot snapshot;
  snapshot.Publish("test", OneGauge(1));
  absl::Notification woken;
  snapshot.set_refresh([&woken] { woken.Notify(); }, absl::Seconds(10));
  std::thread loop([&] {
    woken.WaitForNotification();
    ASSERT_TRUE(snapshot.TakeRefreshRequest());
    EXPECT_FALSE(snapshot.TakeRefreshRequest());  // once per scrape
    snapshot.Publish("test", OneGauge(2));
    snapshot.MarkFresh();
  });
  absl::Time start = absl::Now();
  EXPECT_EQ(ValueOf(snapshot.Collect()), 2);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  loop.join();
}

TEST(MetricsSnapshotTest, AScrapeNobodyAnswersServesTheLastFiguresAfterItsWait) {
  MetricsSnapshot snapshot;
  snapshot.Publish("test", OneGauge(1));
  std::atomic<int> requests{0};
  snapshot.set_refresh([&requests] { ++requests; }, absl::Milliseconds(100));
  absl::Time start = absl::Now();
  EXPECT_EQ(ValueOf(snapshot.Collect()), 1);
  absl::Duration waited = absl::Now() - start;
  EXPECT_GE(waited, absl::Milliseconds(90));
  EXPECT_EQ(requests.load(), 1);
  EXPECT_TRUE(snapshot.TakeRefreshRequest());
}

}  // namespace
}  // namespace pystrobe

// Record's summary and the daemon's pystrobe_dropped_total both come from the
// one table of kernel drop reasons: every reason the kernel counts is printed
// and exported, and the summary's text is what scripts have always read.
#include "daemon/cli/record_summary.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "absl/time/time.h"
#include "daemon/loader/drop_reasons.h"
#include "daemon/service/self_metrics.h"

namespace pystrobe {
namespace {

// Every reason gets its own count (1000 + its index), so a count printed or
// exported under the wrong reason is caught.
SamplerCounters DistinctDrops() {
  SamplerCounters kernel;
  for (const DropReason& row : kDropReasons) kernel.dropped[row.reason] = 1000 + row.reason;
  kernel.python_walked = 50;
  kernel.python_truncated = 3;
  kernel.python_at_exec = 2;
  kernel.offcpu_sent = 7;
  return kernel;
}

RecordTotals SomeTotals() {
  return {.samples = 400,
          .processes = 4,
          .python_processes = 1,
          .malformed_records = 5,
          .python_codes_unreadable = 6,
          .python_codes_from_copies = 8,
          .samples_without_gil = 9};
}

TEST(DropReasonTableTest, RowsAreInEnumOrderWithDistinctLabelsAndWords) {
  std::set<std::string_view> labels, words;
  for (int i = 0; i < PYSTROBE_DROP_REASON_COUNT; ++i) {
    const DropReason& row = kDropReasons[i];
    EXPECT_EQ(row.reason, i);
    EXPECT_FALSE(row.metric_label.empty()) << "reason " << i;
    EXPECT_EQ(row.metric_label.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"),
              std::string_view::npos)
        << row.metric_label;
    EXPECT_FALSE(row.summary_words.empty()) << "reason " << i;
    EXPECT_TRUE(labels.insert(row.metric_label).second) << row.metric_label;
    EXPECT_TRUE(words.insert(row.summary_words).second) << row.summary_words;
  }
}

TEST(RecordSummaryTest, EveryKernelDropReasonIsPrintedWithItsOwnCount) {
  std::string text = RecordSummary(DistinctDrops(), SomeTotals(), absl::Seconds(2), 99);
  for (const DropReason& row : kDropReasons) {
    std::string printed =
        " " + std::to_string(1000 + row.reason) + " " + std::string(row.summary_words);
    EXPECT_NE(text.find(printed), std::string::npos) << row.summary_words << " missing from:\n"
                                                     << text;
  }
}

TEST(RecordSummaryTest, TextIsTheOneScriptsRead) {
  SamplerCounters kernel = DistinctDrops();
  kernel.period_redraws = 90;
  kernel.period_redraws_failed = 2;
  kernel.python_codes_sent = 11;
  kernel.python_codes_deferred = 3;
  kernel.python_code_copy_ns = 250'000;
  RecordTotals totals = SomeTotals();
  totals.python_code_copy_bytes = 1536;
  EXPECT_EQ(RecordSummary(kernel, totals, absl::Milliseconds(2049), 99),
            "pystrobe: 400 samples of 4 processes in 2.0 s at 99 Hz\n"
            "pystrobe: lost 1000 samples (ring buffer full), 5 malformed records, 1003 process "
            "events; stack reads failed: 1001 kernel, 1002 user\n"
            "pystrobe: Python: 1 processes, 50 samples walked, 3 truncated, 1004 walks cut by "
            "failed reads, 1005 threads without a thread state, 6 code objects unreadable, 8 "
            "named from the kernel's copies (11 sent, 1.5 KiB, 0.25 ms in the kernel; 3 put off "
            "to a later sample), 2 processes known from their exec, 1007 code object copies "
            "lost\n"
            "pystrobe: off CPU: 7 intervals, 1006 stacks that could not be kept\n"
            "pystrobe: native: 0 walks whole, 0 ended in JIT code, 0 truncated, 1008 native walks "
            "ended in [unknown] (of them 1009 before their mappings were read, 1010 before their "
            "tables were loaded, 1011 before their process was read)\n"
            "pystrobe: the kernel refused 2 of 92 redraws of a CPU's sampling period; those CPUs "
            "kept their previous period a while\n"
            "pystrobe: --gil left out 9 samples of threads not holding the GIL\n");
}

TEST(RecordSummaryTest, PythonOffCpuAndGilLinesOnlyWhenTheyHaveSomethingToSay) {
  RecordTotals totals = {.samples = 10, .processes = 1};
  EXPECT_EQ(RecordSummary(SamplerCounters(), totals, absl::Seconds(1), 49),
            "pystrobe: 10 samples of 1 processes in 1.0 s at 49 Hz\n"
            "pystrobe: lost 0 samples (ring buffer full), 0 malformed records, 0 process "
            "events; stack reads failed: 0 kernel, 0 user\n");
}

// A process whose CPython was not read has native frames only: the summary
// says which and why, the first few of them.
TEST(RecordSummaryTest, CPythonNotReadIsWarnedWithWhy) {
  RecordTotals totals = {.samples = 10, .processes = 3, .python_not_read = 3};
  totals.python_not_read_examples = {
      {.pid = 41, .comm = "python3.5", .why = absl::UnimplementedError("CPython 3.5")},
      {.pid = 42, .comm = "app", .why = absl::PermissionDeniedError("process 42: denied")}};
  const std::string text = RecordSummary(SamplerCounters(), totals, absl::Seconds(1), 49);
  EXPECT_NE(text.find("pystrobe: warning: CPython not read in 3 processes (their samples have "
                      "native frames only); 41 (python3.5): CPython 3.5; 42 (app): process 42: "
                      "denied; ...\n"),
            std::string::npos)
      << text;
  totals.python_not_read = 0;
  totals.python_not_read_examples.clear();
  EXPECT_EQ(RecordSummary(SamplerCounters(), totals, absl::Seconds(1), 49).find("not read"),
            std::string::npos);
}

TEST(SelfMetricsTest, EveryKernelDropReasonIsExportedUnderItsLabel) {
  DaemonHealth health;
  health.sampler = DistinctDrops();
  std::vector<prometheus::MetricFamily> families = SelfMetricFamilies(health, {});
  const prometheus::MetricFamily* dropped = nullptr;
  for (const auto& family : families) {
    if (family.name == "pystrobe_dropped_total") dropped = &family;
  }
  ASSERT_NE(dropped, nullptr);
  for (const DropReason& row : kDropReasons) {
    int found = 0;
    for (const auto& metric : dropped->metric) {
      for (const auto& label : metric.label) {
        if (label.name == "reason" && label.value == row.metric_label) {
          ++found;
          EXPECT_EQ(metric.counter.value, 1000 + row.reason) << row.metric_label;
        }
      }
    }
    EXPECT_EQ(found, 1) << row.metric_label;
  }
}

// --summary-json: the same counts, parsed as JSON, each under its own key.
TEST(RecordSummaryJsonTest, EveryCountIsInTheJsonUnderItsOwnKey) {
  RecordTotals totals = SomeTotals();
  totals.python_not_read = 12;
  std::string json = RecordSummaryJson(DistinctDrops(), totals, absl::Seconds(2), 99);
  ASSERT_EQ(json.back(), '\n');
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
  const auto& fields = parsed.fields();
  EXPECT_EQ(fields.at("samples").number_value(), 400);
  EXPECT_EQ(fields.at("processes").number_value(), 4);
  EXPECT_EQ(fields.at("seconds").number_value(), 2);
  EXPECT_EQ(fields.at("rate_hz").number_value(), 99);
  EXPECT_EQ(fields.at("malformed_records").number_value(), 5);
  EXPECT_EQ(fields.at("offcpu_intervals").number_value(), 7);
  EXPECT_EQ(fields.at("samples_without_gil").number_value(), 9);
  const auto& python = fields.at("python").struct_value().fields();
  EXPECT_EQ(python.at("processes").number_value(), 1);
  EXPECT_EQ(python.at("not_read").number_value(), 12);
  EXPECT_EQ(python.at("samples_walked").number_value(), 50);
  EXPECT_EQ(python.at("truncated").number_value(), 3);
  EXPECT_EQ(python.at("codes_unreadable").number_value(), 6);
  EXPECT_EQ(python.at("codes_from_copies").number_value(), 8);
  EXPECT_EQ(python.at("known_from_exec").number_value(), 2);
  const auto& dropped = fields.at("dropped").struct_value().fields();
  EXPECT_EQ(dropped.size(), kDropReasons.size());
  for (const DropReason& row : kDropReasons) {
    std::string label(row.metric_label);
    ASSERT_TRUE(dropped.contains(label)) << label;
    EXPECT_EQ(dropped.at(label).number_value(), 1000 + row.reason) << label;
  }
}

}  // namespace
}  // namespace pystrobe

// `pystrobe diff`: what changed between two recordings, normalised to each
// one's total so that recordings of different lengths compare: a table of
// shares before and after, and a differential flame graph.
#ifndef PYSTROBE_DAEMON_REPORTS_RECORDING_DIFF_H_
#define PYSTROBE_DAEMON_REPORTS_RECORDING_DIFF_H_

#include <cstdint>
#include <ostream>
#include <vector>

#include "absl/status/status.h"
#include "daemon/reports/flat_report.h"
#include "daemon/reports/recording_reader.h"
#include "model/profile.h"

namespace pystrobe {

struct DiffRow {
  ReportKey key;
  ReportRow before;  // samples; zero where the key is absent
  ReportRow after;
  double before_self = 0;  // shares of each recording's total, as fractions
  double after_self = 0;
  double before_total = 0;
  double after_total = 0;

  double delta_self() const { return after_self - before_self; }
  double delta_total() const { return after_total - before_total; }
};

struct RecordingDiff {
  int64_t before_total = 0;
  int64_t after_total = 0;
  // Biggest change first (by |delta| of `sort`'s column), unchanged rows last.
  std::vector<DiffRow> rows;
};

RecordingDiff DiffRecordings(const Recording& before, size_t before_type, const Recording& after,
                             size_t after_type, ReportGrouping by, ReportSort sort);

// The recording's stacks as a Profile of one sample type, frames named as
// in folded stacks, for the flame graph writer.
Profile ToProfile(const Recording& recording, size_t sample_type);
// The same, of the stacks `filter` keeps (its sample type is `sample_type`).
Profile ToProfile(const Recording& recording, size_t sample_type, const ReportFilter& filter);

// A flame graph of AFTER in which each frame is red where its stack's share
// grew since BEFORE, blue where it shrank, white where it stayed, deeper
// with the size of the change (the largest change is the deepest colour),
// as Brendan Gregg's differential flame graphs. Stacks found only in
// BEFORE are not drawn; the table holds them.
absl::Status WriteDiffFlameGraph(const Recording& before, size_t before_type,
                                 const Recording& after, size_t after_type, std::string title,
                                 std::ostream& out);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_REPORTS_RECORDING_DIFF_H_

// The views of `pystrobe report` over a Recording: the flat table (pstats'
// tottime/cumtime, per function, line or file), a function's callers and
// callees, and its source lines with their shares.
#ifndef PYSTROBE_DAEMON_REPORTS_FLAT_REPORT_H_
#define PYSTROBE_DAEMON_REPORTS_FLAT_REPORT_H_

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/reports/recording_reader.h"
#include "daemon/reports/sample_charge.h"

namespace pystrobe {

// What one row of the table stands for.
enum class ReportGrouping { kFunction, kLine, kFile };
enum class ReportSort { kSelf, kTotal };

// "function", "line", "file" (as --by takes them); InvalidArgument otherwise.
absl::StatusOr<ReportGrouping> ParseReportGrouping(std::string_view text);
absl::StatusOr<ReportSort> ParseReportSort(std::string_view text);

// The row a frame falls in: with kFile, `function` is empty and frames
// without a file share the file kNoFile; with kFunction, `line` is 0.
struct ReportKey {
  std::string function;
  std::string file;
  int64_t line = 0;

  friend bool operator==(const ReportKey&, const ReportKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ReportKey& k) {
    return H::combine(std::move(h), k.function, k.file, k.line);
  }
};
inline constexpr std::string_view kNoFile = "[no file]";

ReportKey KeyOf(const RecordedFrame& frame, ReportGrouping by);

// A value in its unit ("nanoseconds", "bytes", "count"...) as a person
// reads it: "1.250s", "3.4MiB", "120".
std::string FormatSampleValue(int64_t value, std::string_view unit);

// A row's self samples are the samples charged to it (see ChargeSample):
// those whose innermost Python frame is in it, or, in stacks without Python
// frames, whose leaf is. So the native function a Python line called has
// total but no self in a Python program; the line has the self, split into
// columns by where the time went.
struct ReportRow {
  ReportKey key;
  int64_t self = 0;        // charged to it; the sum of `columns`
  int64_t total = 0;       // in stacks that hold it, once per stack however deep it recurses
  ColumnValues columns{};  // self, by where the time went
};

// Which samples a view counts.
struct ReportFilter {
  size_t sample_type = 0;
  // Only stacks with a frame whose function or file the pattern matches
  // (std::regex_search); all stacks when unset.
  std::optional<std::regex> focus;

  bool Keeps(const Recording& recording, const RecordedStack& stack) const;
};

struct FlatReport {
  int64_t total = 0;            // all samples of the sample type: what shares divide by
  int64_t focused = 0;          // the samples the filter kept
  std::vector<ReportRow> rows;  // heaviest first, by the sort asked for
  ColumnValues columns{};       // the kept samples by column: which columns to show
};

FlatReport BuildFlatReport(const Recording& recording, const ReportFilter& filter,
                           ReportGrouping by, ReportSort sort);

// Sorts rows heaviest first by `sort`, then by the other column, then by key.
void SortRows(std::vector<ReportRow>& rows, ReportSort sort);

// Whether `frame` is the function a user named: its function name, or
// "file:function" to tell apart functions of one name in several files.
bool NamesFunction(const RecordedFrame& frame, std::string_view function);

// The functions that called `function` (callers) or that it called
// (callees), grouped by `by`; a row's total is the samples of the stacks
// that pass through that edge, once per stack. Callees has a "[self]" row
// for the samples where the function itself was running; callers a
// "[root]" row where it was the root.
struct CallGraphReport {
  int64_t total = 0;           // all samples
  int64_t function_total = 0;  // samples with the function on the stack
  std::vector<ReportRow> rows;
};
enum class CallDirection { kCallers, kCallees };
inline constexpr std::string_view kSelfRow = "[self]";
inline constexpr std::string_view kRootRow = "[root]";
CallGraphReport BuildCallGraphReport(const Recording& recording, const ReportFilter& filter,
                                     std::string_view function, CallDirection direction,
                                     ReportGrouping by);

// The lines of `function` that samples landed on, per file, with the
// source text where the file can be read.
struct SourceLine {
  int64_t line = 0;
  int64_t self = 0;  // charged to the line, as ReportRow's self
  int64_t total = 0;
  ColumnValues columns{};
  std::optional<std::string> text;  // unset when the file could not be read
};
struct SourceFile {
  std::string function;
  std::string file;      // as the recording names it
  std::string resolved;  // the path it was read from; empty when not found
  int64_t function_total = 0;
  std::vector<SourceLine> lines;  // in line order, from the def to the last line sampled
};
struct SourceReport {
  int64_t total = 0;
  ColumnValues columns{};         // over the lines shown
  std::vector<SourceFile> files;  // heaviest first
};
// Relative file names are looked for as given, then under each of
// `search_dirs` (the recording's directory). With `read_sources` false no
// file is opened (the lines come without text): for a reader with more
// rights than whoever gave the file names, as the daemon serving a page
// (a process names its own code's files, and could name any file).
SourceReport BuildSourceReport(const Recording& recording, const ReportFilter& filter,
                               std::string_view function,
                               const std::vector<std::string>& search_dirs,
                               bool read_sources = true);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_REPORTS_FLAT_REPORT_H_

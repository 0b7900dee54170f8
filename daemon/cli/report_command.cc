#include "daemon/cli/report_command.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "daemon/cli/exit_status.h"
#include "daemon/cli/report_options.h"
#include "daemon/reports/call_graph_dot.h"
#include "daemon/reports/flat_report.h"
#include "daemon/reports/html_report.h"
#include "daemon/reports/recording_diff.h"
#include "daemon/reports/recording_reader.h"
#include "daemon/reports/sample_charge.h"
#include "exporters/json_string.h"

namespace pystrobe {
namespace {

// Rows a text table shows unless --top says otherwise; JSON has them all.
constexpr int64_t kDefaultTop = 30;

std::string FormatValue(int64_t value, absl::string_view unit) {
  return FormatSampleValue(value, std::string_view(unit.data(), unit.size()));
}

double Share(int64_t value, int64_t total) {
  return total == 0 ? 0.0 : static_cast<double>(value) / static_cast<double>(total);
}

std::string KeyText(const ReportKey& key, ReportGrouping by) {
  if (by == ReportGrouping::kFile) return key.file;
  return FrameDisplayName({key.function, key.file, key.line});
}

// The JSON fields that name a row.
std::string KeyJson(const ReportKey& key, ReportGrouping by) {
  std::string json =
      absl::StrCat("\"function\":", JsonString(key.function), ",\"file\":", JsonString(key.file));
  if (by == ReportGrouping::kLine) absl::StrAppend(&json, ",\"line\":", key.line);
  return json;
}

std::string ColumnsHeader(const std::vector<CostColumn>& shown) {
  std::string out;
  for (CostColumn column : shown) absl::StrAppendFormat(&out, " %10s", CostColumnTitle(column));
  return out;
}

// Each shown column's share of all samples; blank where it has none.
std::string ColumnsText(const std::vector<CostColumn>& shown, const ColumnValues& values,
                        int64_t total) {
  std::string out;
  for (CostColumn column : shown) {
    int64_t value = values[static_cast<size_t>(column)];
    if (value == 0) {
      absl::StrAppendFormat(&out, " %10s", ".");
    } else {
      absl::StrAppendFormat(&out, " %9.2f%%", 100 * Share(value, total));
    }
  }
  return out;
}

// ,"columns":{"python":0.5,...},"column_samples":{"python":10,...}
std::string ColumnsJson(const std::vector<CostColumn>& shown, const ColumnValues& values,
                        int64_t total) {
  std::string shares;
  std::string samples;
  for (CostColumn column : shown) {
    const char* key = CostColumnKey(column);
    int64_t value = values[static_cast<size_t>(column)];
    absl::StrAppendFormat(&shares, "%s\"%s\":%.6f", shares.empty() ? "" : ",", key,
                          Share(value, total));
    absl::StrAppendFormat(&samples, "%s\"%s\":%d", samples.empty() ? "" : ",", key, value);
  }
  return absl::StrCat(",\"columns\":{", shares, "},\"column_samples\":{", samples, "}");
}

std::string ColumnNamesJson(const std::vector<CostColumn>& shown) {
  std::string out = "[";
  for (size_t i = 0; i < shown.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ",", "\"", CostColumnKey(shown[i]), "\"");
  }
  return out + "]";
}

size_t RowLimit(const TableOptions& options, size_t rows) {
  int64_t top = options.top.value_or(options.json ? 0 : kDefaultTop);
  return top == 0 ? rows : std::min(rows, static_cast<size_t>(top));
}

bool Print(const std::string& text) {
  fwrite(text.data(), 1, text.size(), stdout);
  return fflush(stdout) == 0;
}

// The recording and the sample type the tables count.
struct LoadedRecording {
  Recording recording;
  size_t sample_type = 0;
};

absl::StatusOr<LoadedRecording> Load(const std::string& path,
                                     const std::optional<std::string>& sample_type) {
  absl::StatusOr<Recording> recording = ReadRecording(path);
  if (!recording.ok()) return recording.status();
  LoadedRecording loaded{std::move(*recording), 0};
  loaded.sample_type = loaded.recording.default_sample_type;
  if (sample_type) {
    absl::StatusOr<size_t> index = loaded.recording.SampleTypeIndex(*sample_type);
    if (!index.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sample-type ", *sample_type, ": ", path, ": ", index.status().message()));
    }
    loaded.sample_type = *index;
  }
  return loaded;
}

std::string Header(const std::string& path, const LoadedRecording& loaded, int64_t total) {
  const RecordedSampleType& type = loaded.recording.sample_types[loaded.sample_type];
  std::string header = absl::StrFormat("%s: %s, %s (%s): %s in all", path, loaded.recording.format,
                                       type.type, type.unit, FormatValue(total, type.unit));
  if (type.unit != "count") absl::StrAppend(&header, " (", total, ")");
  return header;
}

std::string FlatText(const std::string& path, const LoadedRecording& loaded,
                     const ReportOptions& options, const FlatReport& report) {
  const std::string& unit = loaded.recording.sample_types[loaded.sample_type].unit;
  std::string out = Header(path, loaded, report.total);
  if (options.focus) {
    absl::StrAppendFormat(&out, "; --focus '%s': %s (%.2f%%)", *options.focus,
                          FormatValue(report.focused, unit),
                          100 * Share(report.focused, report.total));
  }
  std::vector<CostColumn> shown = ColumnsWithSamples(report.columns);
  absl::StrAppendFormat(&out, "\n\n%8s %12s %8s %12s%s  %s\n", "self%", "self", "total%", "total",
                        ColumnsHeader(shown),
                        options.table.by == ReportGrouping::kFile ? "file" : "function");
  size_t limit = RowLimit(options.table, report.rows.size());
  for (size_t i = 0; i < limit; ++i) {
    const ReportRow& row = report.rows[i];
    absl::StrAppendFormat(&out, "%7.2f%% %12s %7.2f%% %12s%s  %s\n",
                          100 * Share(row.self, report.total), FormatValue(row.self, unit),
                          100 * Share(row.total, report.total), FormatValue(row.total, unit),
                          ColumnsText(shown, row.columns, report.total),
                          KeyText(row.key, options.table.by));
  }
  if (limit < report.rows.size()) {
    absl::StrAppendFormat(&out, "... %d more (--top 0 shows all)\n", report.rows.size() - limit);
  }
  return out;
}

std::string FlatJson(const std::string& path, const LoadedRecording& loaded,
                     const ReportOptions& options, const FlatReport& report) {
  const RecordedSampleType& type = loaded.recording.sample_types[loaded.sample_type];
  std::vector<CostColumn> shown = ColumnsWithSamples(report.columns);
  std::string out = absl::StrCat(
      "{\"file\":", JsonString(path), ",\"format\":", JsonString(loaded.recording.format),
      ",\"sample_type\":{\"type\":", JsonString(type.type), ",\"unit\":", JsonString(type.unit),
      "},\"total_samples\":", report.total, ",\"focused_samples\":", report.focused,
      ",\"column_names\":", ColumnNamesJson(shown),
      ColumnsJson(shown, report.columns, report.total), ",\"rows\":[");
  size_t limit = RowLimit(options.table, report.rows.size());
  for (size_t i = 0; i < limit; ++i) {
    const ReportRow& row = report.rows[i];
    absl::StrAppendFormat(&out,
                          "%s\n{%s,\"self\":%.6f,\"total\":%.6f,\"self_samples\":%d,"
                          "\"total_samples\":%d%s}",
                          i == 0 ? "" : ",", KeyJson(row.key, options.table.by),
                          Share(row.self, report.total), Share(row.total, report.total), row.self,
                          row.total, ColumnsJson(shown, row.columns, report.total));
  }
  out.append("]}\n");
  return out;
}

std::string CallGraphText(const std::string& path, const LoadedRecording& loaded,
                          const ReportOptions& options, const CallGraphReport& report,
                          const std::string& function, CallDirection direction) {
  const std::string& unit = loaded.recording.sample_types[loaded.sample_type].unit;
  std::string out = Header(path, loaded, report.total);
  absl::StrAppendFormat(&out, "\n%s: %s (%.2f%% of all)\n\n%8s %8s %12s  %s\n", function,
                        FormatValue(report.function_total, unit),
                        100 * Share(report.function_total, report.total), "of it", "of all",
                        "samples", direction == CallDirection::kCallers ? "called from" : "calls");
  size_t limit = RowLimit(options.table, report.rows.size());
  for (size_t i = 0; i < limit; ++i) {
    const ReportRow& row = report.rows[i];
    absl::StrAppendFormat(&out, "%7.2f%% %7.2f%% %12s  %s\n",
                          100 * Share(row.total, report.function_total),
                          100 * Share(row.total, report.total), FormatValue(row.total, unit),
                          KeyText(row.key, options.table.by));
  }
  return out;
}

std::string CallGraphJson(const ReportOptions& options, const CallGraphReport& report,
                          const std::string& function, CallDirection direction) {
  std::string out =
      absl::StrCat("{\"function\":", JsonString(function), ",\"total_samples\":", report.total,
                   ",\"function_samples\":", report.function_total, ",\"",
                   direction == CallDirection::kCallers ? "callers" : "callees", "\":[");
  size_t limit = RowLimit(options.table, report.rows.size());
  for (size_t i = 0; i < limit; ++i) {
    const ReportRow& row = report.rows[i];
    absl::StrAppendFormat(&out, "%s\n{%s,\"total\":%.6f,\"share_of_function\":%.6f,\"samples\":%d}",
                          i == 0 ? "" : ",", KeyJson(row.key, options.table.by),
                          Share(row.total, report.total), Share(row.total, report.function_total),
                          row.total);
  }
  out.append("]}\n");
  return out;
}

std::string SourceText(const std::string& path, const LoadedRecording& loaded,
                       const SourceReport& report) {
  const std::string& unit = loaded.recording.sample_types[loaded.sample_type].unit;
  std::string out = Header(path, loaded, report.total);
  std::vector<CostColumn> shown = ColumnsWithSamples(report.columns);
  for (const SourceFile& file : report.files) {
    absl::StrAppendFormat(&out, "\n\n%s in %s: %s (%.2f%% of all)%s\n%8s%s %8s %6s\n",
                          file.function, file.file, FormatValue(file.function_total, unit),
                          100 * Share(file.function_total, report.total),
                          file.resolved.empty() ? "; source not found, lines only" : "", "self%",
                          ColumnsHeader(shown), "total%", "line");
    for (const SourceLine& line : file.lines) {
      std::string self =
          line.self > 0 ? absl::StrFormat("%.2f%%", 100 * Share(line.self, report.total)) : "";
      std::string total =
          line.total > 0 ? absl::StrFormat("%.2f%%", 100 * Share(line.total, report.total)) : "";
      std::string columns = line.self > 0 ? ColumnsText(shown, line.columns, report.total)
                                          : std::string(11 * shown.size(), ' ');
      absl::StrAppendFormat(&out, "%8s%s %8s %6d  %s\n", self, columns, total, line.line,
                            line.text.value_or(""));
    }
  }
  out.append("\n");
  return out;
}

std::string SourceJson(const SourceReport& report, const std::string& function) {
  std::string out = absl::StrCat("{\"function\":", JsonString(function),
                                 ",\"total_samples\":", report.total, ",\"files\":[");
  for (size_t f = 0; f < report.files.size(); ++f) {
    const SourceFile& file = report.files[f];
    absl::StrAppend(&out, f == 0 ? "" : ",", "\n{\"function\":", JsonString(file.function),
                    ",\"file\":", JsonString(file.file),
                    ",\"source\":", file.resolved.empty() ? "null" : JsonString(file.resolved),
                    ",\"function_samples\":", file.function_total, ",\"lines\":[");
    for (size_t l = 0; l < file.lines.size(); ++l) {
      const SourceLine& line = file.lines[l];
      absl::StrAppendFormat(
          &out,
          "%s\n{\"line\":%d,\"self\":%.6f,\"total\":%.6f,\"self_samples\":%d,"
          "\"total_samples\":%d%s,\"text\":%s}",
          l == 0 ? "" : ",", line.line, Share(line.self, report.total),
          Share(line.total, report.total), line.self, line.total,
          ColumnsJson(ColumnsWithSamples(report.columns), line.columns, report.total),
          line.text ? JsonString(*line.text) : "null");
    }
    out.append("]}");
  }
  out.append("]}\n");
  return out;
}

std::string DiffText(const DiffOptions& options, const LoadedRecording& before,
                     const LoadedRecording& after, const RecordingDiff& diff) {
  std::string out =
      absl::StrCat("before: ", Header(options.before, before, diff.before_total), "\n",
                   "after:  ", Header(options.after, after, diff.after_total), "\n");
  absl::StrAppendFormat(&out, "\n%9s %8s %8s %9s %8s %8s  %s\n", "self", "before", "after", "total",
                        "before", "after",
                        options.table.by == ReportGrouping::kFile ? "file" : "function");
  size_t limit = RowLimit(options.table, diff.rows.size());
  for (size_t i = 0; i < limit; ++i) {
    const DiffRow& row = diff.rows[i];
    absl::StrAppendFormat(&out, "%+8.2f%% %7.2f%% %7.2f%% %+8.2f%% %7.2f%% %7.2f%%  %s\n",
                          100 * row.delta_self(), 100 * row.before_self, 100 * row.after_self,
                          100 * row.delta_total(), 100 * row.before_total, 100 * row.after_total,
                          KeyText(row.key, options.table.by));
  }
  if (limit < diff.rows.size()) {
    absl::StrAppendFormat(&out, "... %d more (--top 0 shows all)\n", diff.rows.size() - limit);
  }
  return out;
}

std::string DiffJson(const DiffOptions& options, const RecordingDiff& diff) {
  std::string out = absl::StrCat("{\"before\":{\"file\":", JsonString(options.before),
                                 ",\"total_samples\":", diff.before_total,
                                 "},\"after\":{\"file\":", JsonString(options.after),
                                 ",\"total_samples\":", diff.after_total, "},\"rows\":[");
  size_t limit = RowLimit(options.table, diff.rows.size());
  for (size_t i = 0; i < limit; ++i) {
    const DiffRow& row = diff.rows[i];
    absl::StrAppendFormat(&out,
                          "%s\n{%s,\"before_self\":%.6f,\"after_self\":%.6f,\"delta_self\":%.6f,"
                          "\"before_total\":%.6f,\"after_total\":%.6f,\"delta_total\":%.6f,"
                          "\"before_self_samples\":%d,\"after_self_samples\":%d,"
                          "\"before_total_samples\":%d,\"after_total_samples\":%d}",
                          i == 0 ? "" : ",", KeyJson(row.key, options.table.by), row.before_self,
                          row.after_self, row.delta_self(), row.before_total, row.after_total,
                          row.delta_total(), row.before.self, row.after.self, row.before.total,
                          row.after.total);
  }
  out.append("]}\n");
  return out;
}

// Writes what `write` makes to `path`, or to stdout without one; a
// message on stderr says why not, naming the command and the file.
bool WriteTo(const std::optional<std::string>& path, absl::string_view command,
             const std::function<absl::Status(std::ostream&)>& write) {
  if (!path) {
    std::ostringstream text;
    absl::Status written = write(text);
    if (!written.ok()) {
      fprintf(stderr, "pystrobe %s: %s\n", std::string(command).c_str(),
              std::string(written.message()).c_str());
      return false;
    }
    return Print(text.str());
  }
  std::ofstream out(*path, std::ios::binary | std::ios::trunc);
  absl::Status written = out ? write(out) : absl::PermissionDeniedError("cannot open for writing");
  if (written.ok()) {
    out.close();
    if (!out) written = absl::DataLossError("write failed");
  }
  if (!written.ok()) {
    fprintf(stderr, "pystrobe %s: %s: %s\n", std::string(command).c_str(), path->c_str(),
            std::string(written.message()).c_str());
    return false;
  }
  fprintf(stderr, "pystrobe %s: wrote %s\n", std::string(command).c_str(), path->c_str());
  return true;
}

}  // namespace

int RunReportCommand(const std::vector<std::string>& args) {
  absl::StatusOr<ReportOptions> parsed = ParseReportOptions(args);
  if (!parsed.ok()) return UsageError("report", parsed.status());
  const ReportOptions& options = *parsed;
  if (options.help) {
    fputs(ReportUsage(), stdout);
    return kExitOk;
  }
  ReportFilter filter;
  if (options.focus) {
    try {
      filter.focus.emplace(*options.focus, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& error) {
      return UsageError("report", absl::InvalidArgumentError(absl::StrCat(
                                      "--focus '", *options.focus,
                                      "' is not a regular expression: ", error.what())));
    }
  }
  absl::StatusOr<LoadedRecording> loaded = Load(options.file, options.table.sample_type);
  if (!loaded.ok()) return UsageError("report", loaded.status());
  filter.sample_type = loaded->sample_type;
  const Recording& recording = loaded->recording;

  if (options.source || options.callers || options.callees) {
    const std::string& function = options.source    ? *options.source
                                  : options.callers ? *options.callers
                                                    : *options.callees;
    bool found = false;
    for (const RecordedFrame& frame : recording.frames) found |= NamesFunction(frame, function);
    if (!found) {
      return UsageError("report", absl::NotFoundError(absl::StrCat(
                                      "no function '", function, "' in ", options.file,
                                      " (give a name as the table shows it, or FILE:NAME)")));
    }
    if (options.source) {
      std::vector<std::string> dirs = {std::filesystem::path(options.file).parent_path().string()};
      SourceReport report = BuildSourceReport(recording, filter, function, dirs);
      return Print(options.table.json ? SourceJson(report, function)
                                      : SourceText(options.file, *loaded, report))
                 ? kExitOk
                 : kExitFailure;
    }
    CallDirection direction = options.callers ? CallDirection::kCallers : CallDirection::kCallees;
    CallGraphReport report =
        BuildCallGraphReport(recording, filter, function, direction, options.table.by);
    return Print(options.table.json
                     ? CallGraphJson(options, report, function, direction)
                     : CallGraphText(options.file, *loaded, options, report, function, direction))
               ? kExitOk
               : kExitFailure;
  }

  if (options.dot) {
    CallGraph graph = BuildCallGraph(recording, filter, options.graph);
    const RecordedSampleType& type = recording.sample_types[filter.sample_type];
    std::string title = absl::StrCat("pystrobe: ", options.file, " (", type.type, ")");
    return WriteTo(options.output, "report",
                   [&](std::ostream& out) {
                     out << CallGraphDot(graph, type.unit, title);
                     return out ? absl::OkStatus() : absl::DataLossError("write failed");
                   })
               ? kExitOk
               : kExitFailure;
  }
  if (options.html) {
    HtmlReportOptions html;
    html.title = options.file;
    html.sample_type = filter.sample_type;
    html.focus = filter.focus;
    if (options.table.top) html.rows = *options.table.top == 0 ? SIZE_MAX : *options.table.top;
    html.source_dirs = {std::filesystem::path(options.file).parent_path().string()};
    return WriteTo(options.output, "report",
                   [&](std::ostream& out) { return WriteHtmlReport(recording, html, out); })
               ? kExitOk
               : kExitFailure;
  }

  FlatReport report = BuildFlatReport(recording, filter, options.table.by, options.table.sort);
  return Print(options.table.json ? FlatJson(options.file, *loaded, options, report)
                                  : FlatText(options.file, *loaded, options, report))
             ? kExitOk
             : kExitFailure;
}

int RunDiffCommand(const std::vector<std::string>& args) {
  absl::StatusOr<DiffOptions> parsed = ParseDiffOptions(args);
  if (!parsed.ok()) return UsageError("diff", parsed.status());
  const DiffOptions& options = *parsed;
  if (options.help) {
    fputs(DiffUsage(), stdout);
    return kExitOk;
  }
  absl::StatusOr<LoadedRecording> before = Load(options.before, options.table.sample_type);
  if (!before.ok()) return UsageError("diff", before.status());
  absl::StatusOr<LoadedRecording> after = Load(options.after, options.table.sample_type);
  if (!after.ok()) return UsageError("diff", after.status());

  if (options.html) {
    HtmlDiffOptions html;
    html.before_name = options.before;
    html.after_name = options.after;
    html.before_type = before->sample_type;
    html.after_type = after->sample_type;
    if (options.table.top) html.rows = *options.table.top == 0 ? SIZE_MAX : *options.table.top;
    return WriteTo(options.svg, "diff",
                   [&](std::ostream& out) {
                     return WriteHtmlDiff(before->recording, after->recording, html, out);
                   })
               ? kExitOk
               : kExitFailure;
  }
  RecordingDiff diff = DiffRecordings(before->recording, before->sample_type, after->recording,
                                      after->sample_type, options.table.by, options.table.sort);
  if (options.svg) {
    std::ofstream out(*options.svg, std::ios::binary | std::ios::trunc);
    absl::Status written =
        out ? WriteDiffFlameGraph(
                  before->recording, before->sample_type, after->recording, after->sample_type,
                  absl::StrCat("pystrobe diff: ", options.before, " -> ", options.after), out)
            : absl::PermissionDeniedError("cannot open for writing");
    if (written.ok()) {
      out.close();
      if (!out) written = absl::DataLossError("write failed");
    }
    if (!written.ok()) {
      fprintf(stderr, "pystrobe diff: %s: %s\n", options.svg->c_str(),
              std::string(written.message()).c_str());
      return kExitFailure;
    }
    fprintf(stderr, "pystrobe diff: wrote %s\n", options.svg->c_str());
  }
  return Print(options.table.json ? DiffJson(options, diff)
                                  : DiffText(options, *before, *after, diff))
             ? kExitOk
             : kExitFailure;
}

}  // namespace pystrobe

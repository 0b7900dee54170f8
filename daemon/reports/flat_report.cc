#include "daemon/reports/flat_report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pystrobe {
namespace {

// A function's source shown from its def down is at most this long; past
// it (a <module> spanning a file), only the lines with samples are shown.
constexpr int64_t kMaxSourceSpan = 300;
// How far above the first line sampled the def is looked for.
constexpr int64_t kMaxDefSearch = 200;

std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  return lines;
}

size_t Indent(std::string_view text) {
  size_t indent = 0;
  while (indent < text.size() && (text[indent] == ' ' || text[indent] == '\t')) ++indent;
  return indent;
}

std::string_view StripIndent(std::string_view text) { return text.substr(Indent(text)); }

// The line of the def (or class) that holds `line`, or `line` itself.
int64_t DefLineAbove(const std::vector<std::string>& source, int64_t line) {
  if (line < 1 || line > static_cast<int64_t>(source.size())) return line;
  size_t body_indent = Indent(source[line - 1]);
  for (int64_t at = line; at >= 1 && line - at <= kMaxDefSearch; --at) {
    std::string_view text = source[at - 1];
    std::string_view stripped = StripIndent(text);
    if (stripped.empty()) continue;
    bool is_def = stripped.starts_with("def ") || stripped.starts_with("async def ") ||
                  stripped.starts_with("class ");
    if (is_def && (Indent(text) < body_indent || at == line)) {
      // Decorators belong with their def.
      while (at > 1 && StripIndent(source[at - 2]).starts_with('@')) {
        --at;
      }
      return at;
    }
  }
  return line;
}

std::string ResolveSource(const std::string& file, const std::vector<std::string>& search_dirs) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (file.empty() || file.front() == '<') return "";  // "<frozen ...>", "<string>"
  if (fs::is_regular_file(file, error)) return file;
  if (fs::path(file).is_absolute()) return "";
  for (const std::string& dir : search_dirs) {
    fs::path candidate = fs::path(dir) / file;
    if (fs::is_regular_file(candidate, error)) return candidate.string();
  }
  return "";
}

}  // namespace

absl::StatusOr<ReportGrouping> ParseReportGrouping(std::string_view text) {
  if (text == "function") return ReportGrouping::kFunction;
  if (text == "line") return ReportGrouping::kLine;
  if (text == "file") return ReportGrouping::kFile;
  return absl::InvalidArgumentError(
      absl::StrCat("--by takes function, line or file, not '", std::string(text), "'"));
}

absl::StatusOr<ReportSort> ParseReportSort(std::string_view text) {
  if (text == "self") return ReportSort::kSelf;
  if (text == "total") return ReportSort::kTotal;
  return absl::InvalidArgumentError(
      absl::StrCat("--sort takes self or total, not '", std::string(text), "'"));
}

std::string FormatSampleValue(int64_t value, std::string_view unit) {
  double v = static_cast<double>(value);
  if (unit == "nanoseconds") return absl::StrFormat("%.3fs", v / 1e9);
  if (unit == "microseconds") return absl::StrFormat("%.3fs", v / 1e6);
  if (unit == "milliseconds") return absl::StrFormat("%.3fs", v / 1e3);
  if (unit == "seconds") return absl::StrFormat("%ds", value);
  if (unit == "bytes") {
    if (value >= (int64_t{1} << 30)) return absl::StrFormat("%.1fGiB", v / (1 << 30));
    if (value >= (int64_t{1} << 20)) return absl::StrFormat("%.1fMiB", v / (1 << 20));
    if (value >= (int64_t{1} << 10)) return absl::StrFormat("%.1fKiB", v / (1 << 10));
    return absl::StrFormat("%dB", value);
  }
  return absl::StrCat(value);
}

ReportKey KeyOf(const RecordedFrame& frame, ReportGrouping by) {
  switch (by) {
    case ReportGrouping::kFunction:
      return {frame.function, frame.file, 0};
    case ReportGrouping::kLine:
      return {frame.function, frame.file, frame.line};
    case ReportGrouping::kFile:
      return {"", frame.file.empty() ? std::string(kNoFile) : frame.file, 0};
  }
  return {};
}

bool ReportFilter::Keeps(const Recording& recording, const RecordedStack& stack) const {
  if (!focus) return true;
  for (size_t index : stack.frames) {
    const RecordedFrame& frame = recording.frames[index];
    if (std::regex_search(frame.function, *focus) || std::regex_search(frame.file, *focus)) {
      return true;
    }
  }
  return false;
}

void SortRows(std::vector<ReportRow>& rows, ReportSort sort) {
  std::sort(rows.begin(), rows.end(), [sort](const ReportRow& a, const ReportRow& b) {
    auto weight = [sort](const ReportRow& r) {
      return sort == ReportSort::kSelf ? std::pair(r.self, r.total) : std::pair(r.total, r.self);
    };
    if (weight(a) != weight(b)) return weight(a) > weight(b);
    return std::tie(a.key.function, a.key.file, a.key.line) <
           std::tie(b.key.function, b.key.file, b.key.line);
  });
}

FlatReport BuildFlatReport(const Recording& recording, const ReportFilter& filter,
                           ReportGrouping by, ReportSort sort) {
  FlatReport report;
  report.total = recording.Total(filter.sample_type);
  // Frames of one key (a function's lines, by function) share a row.
  absl::flat_hash_map<ReportKey, size_t> row_of_key;
  std::vector<size_t> row_of_frame;
  row_of_frame.reserve(recording.frames.size());
  for (const RecordedFrame& frame : recording.frames) {
    auto [it, inserted] = row_of_key.try_emplace(KeyOf(frame, by), report.rows.size());
    if (inserted) report.rows.push_back({it->first, 0, 0});
    row_of_frame.push_back(it->second);
  }
  const bool memory = IsMemorySampleType(recording.sample_types[filter.sample_type]);
  absl::flat_hash_set<size_t> seen;
  for (const RecordedStack& stack : recording.stacks) {
    int64_t value = stack.values[filter.sample_type];
    if (value == 0 || !filter.Keeps(recording, stack)) continue;
    report.focused += value;
    std::optional<SampleCharge> charge = ChargeSample(recording, stack, memory);
    if (!charge) continue;
    // A recursive function counts once in the stack's total.
    seen.clear();
    for (size_t index : stack.frames) {
      if (seen.insert(row_of_frame[index]).second) report.rows[row_of_frame[index]].total += value;
    }
    ReportRow& charged = report.rows[row_of_frame[stack.frames[charge->position]]];
    charged.self += value;
    charged.columns[static_cast<size_t>(charge->column)] += value;
    report.columns[static_cast<size_t>(charge->column)] += value;
  }
  std::erase_if(report.rows, [](const ReportRow& row) { return row.total == 0; });
  SortRows(report.rows, sort);
  return report;
}

bool NamesFunction(const RecordedFrame& frame, std::string_view function) {
  if (frame.function == function) return true;
  size_t colon = function.rfind(':');
  return colon != std::string_view::npos && function.substr(colon + 1) == frame.function &&
         (function.substr(0, colon) == frame.file ||
          frame.file.ends_with("/" + std::string(function.substr(0, colon))));
}

CallGraphReport BuildCallGraphReport(const Recording& recording, const ReportFilter& filter,
                                     std::string_view function, CallDirection direction,
                                     ReportGrouping by) {
  CallGraphReport report;
  report.total = recording.Total(filter.sample_type);
  std::vector<bool> is_function(recording.frames.size());
  for (size_t i = 0; i < recording.frames.size(); ++i) {
    is_function[i] = NamesFunction(recording.frames[i], function);
  }
  absl::flat_hash_map<ReportKey, size_t> row_of;
  absl::flat_hash_set<size_t> rows_seen;
  for (const RecordedStack& stack : recording.stacks) {
    int64_t value = stack.values[filter.sample_type];
    if (value == 0 || !filter.Keeps(recording, stack)) continue;
    rows_seen.clear();
    bool holds = false;
    for (size_t at = 0; at < stack.frames.size(); ++at) {
      if (!is_function[stack.frames[at]]) continue;
      holds = true;
      ReportKey key;
      if (direction == CallDirection::kCallers) {
        key = at == 0 ? ReportKey{std::string(kRootRow), "", 0}
                      : KeyOf(recording.frames[stack.frames[at - 1]], by);
      } else {
        key = at + 1 == stack.frames.size() ? ReportKey{std::string(kSelfRow), "", 0}
                                            : KeyOf(recording.frames[stack.frames[at + 1]], by);
      }
      auto [it, inserted] = row_of.try_emplace(key, report.rows.size());
      if (inserted) report.rows.push_back({std::move(key), 0, 0});
      if (rows_seen.insert(it->second).second) report.rows[it->second].total += value;
    }
    if (holds) report.function_total += value;
  }
  SortRows(report.rows, ReportSort::kTotal);
  return report;
}

SourceReport BuildSourceReport(const Recording& recording, const ReportFilter& filter,
                               std::string_view function,
                               const std::vector<std::string>& search_dirs, bool read_sources) {
  SourceReport report;
  report.total = recording.Total(filter.sample_type);
  // (function, file) -> line -> samples.
  std::map<std::pair<std::string, std::string>, std::map<int64_t, SourceLine>> by_file;
  std::map<std::pair<std::string, std::string>, int64_t> file_totals;
  std::set<std::pair<std::string, std::string>> files_seen;
  std::set<std::tuple<std::string, std::string, int64_t>> lines_seen;
  const bool memory = IsMemorySampleType(recording.sample_types[filter.sample_type]);
  for (const RecordedStack& stack : recording.stacks) {
    int64_t value = stack.values[filter.sample_type];
    if (value == 0 || !filter.Keeps(recording, stack)) continue;
    std::optional<SampleCharge> charge = ChargeSample(recording, stack, memory);
    files_seen.clear();
    lines_seen.clear();
    for (size_t at = 0; at < stack.frames.size(); ++at) {
      const RecordedFrame& frame = recording.frames[stack.frames[at]];
      if (!NamesFunction(frame, function)) continue;
      std::pair<std::string, std::string> id(frame.function, frame.file);
      SourceLine& line = by_file[id][frame.line];
      line.line = frame.line;
      if (lines_seen.emplace(frame.function, frame.file, frame.line).second) line.total += value;
      if (charge && at == charge->position) {
        line.self += value;
        line.columns[static_cast<size_t>(charge->column)] += value;
        report.columns[static_cast<size_t>(charge->column)] += value;
      }
      if (files_seen.insert(id).second) file_totals[id] += value;
    }
  }
  for (auto& [id, lines] : by_file) {
    SourceFile file;
    file.function = id.first;
    file.file = id.second;
    file.function_total = file_totals[id];
    if (read_sources) file.resolved = ResolveSource(file.file, search_dirs);
    std::vector<std::string> source;
    if (!file.resolved.empty()) source = ReadLines(file.resolved);
    int64_t first = lines.begin()->first;
    int64_t last = lines.rbegin()->first;
    bool whole = !source.empty() && first > 0 && last <= static_cast<int64_t>(source.size());
    if (whole) first = DefLineAbove(source, first);
    if (whole && last - first <= kMaxSourceSpan) {
      for (int64_t n = first; n <= last; ++n) {
        auto it = lines.find(n);
        SourceLine line = it != lines.end() ? it->second : SourceLine{n, 0, 0, {}, std::nullopt};
        line.text = source[n - 1];
        file.lines.push_back(std::move(line));
      }
    } else {
      for (auto& [n, line] : lines) {
        if (n > 0 && n <= static_cast<int64_t>(source.size())) line.text = source[n - 1];
        file.lines.push_back(line);
      }
    }
    report.files.push_back(std::move(file));
  }
  std::stable_sort(
      report.files.begin(), report.files.end(),
      [](const SourceFile& a, const SourceFile& b) { return a.function_total > b.function_total; });
  return report;
}

}  // namespace pystrobe

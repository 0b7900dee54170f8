#include "daemon/cli/report_options.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/flags/flag_table.h"

namespace pystrobe {
namespace {

constexpr int64_t kMaxTop = 1'000'000;

// The help texts of the table flags, which say what report and diff each
// make of them.
struct TableHelp {
  std::string by;
  std::string sort;
  std::string sample_type;
};

// --by, --sort, --top and --sample-type, into `Options::table`.
template <typename Options>
std::vector<Flag<Options>> TableRows(const TableHelp& help) {
  return {
      ValueFlag<Options>({"--by"}, "function|line|file", help.by,
                         [](Options& options, absl::string_view, const std::string& value) {
                           absl::StatusOr<ReportGrouping> by = ParseReportGrouping(value);
                           if (!by.ok()) return by.status();
                           options.table.by = *by;
                           return absl::OkStatus();
                         }),
      ValueFlag<Options>({"--sort"}, "self|total", help.sort,
                         [](Options& options, absl::string_view, const std::string& value) {
                           absl::StatusOr<ReportSort> sort = ParseReportSort(value);
                           if (!sort.ok()) return sort.status();
                           options.table.sort = *sort;
                           return absl::OkStatus();
                         }),
      ValueFlag<Options>({"--top"}, "N", "rows shown (default 30; 0 for all; --json: all)",
                         [](Options& options, absl::string_view, const std::string& value) {
                           int64_t top = 0;
                           if (!absl::SimpleAtoi(value, &top) || top < 0 || top > kMaxTop) {
                             return absl::InvalidArgumentError(
                                 absl::StrCat("--top takes a number of rows from 0 (all) to ",
                                              kMaxTop, ", not '", value, "'"));
                           }
                           options.table.top = top;
                           return absl::OkStatus();
                         }),
      ValueFlag<Options>({"--sample-type"}, "TYPE", help.sample_type,
                         [](Options& options, absl::string_view, std::string value) {
                           options.table.sample_type = std::move(value);
                           return absl::OkStatus();
                         }),
  };
}

// --json, into `Options::table`.
template <typename Options>
Flag<Options> JsonRow(std::string help) {
  return SwitchFlag<Options>({"--json"}, std::move(help),
                             [](Options& options, absl::string_view, const std::string&) {
                               options.table.json = true;
                               return absl::OkStatus();
                             });
}

// A flag whose value, not empty, goes to `member`.
template <typename Options>
Flag<Options> TextFlag(std::vector<std::string> names, std::string value_name, std::string help,
                       std::optional<std::string> Options::*member) {
  return ValueFlag<Options>(
      std::move(names), std::move(value_name), std::move(help),
      [member](Options& options, absl::string_view flag, std::string value) {
        if (value.empty()) {
          return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
        }
        options.*member = std::move(value);
        return absl::OkStatus();
      });
}

// Report's --node-threshold and --edge-threshold: a percentage into `member`.
Flag<ReportOptions> ThresholdFlag(std::string name, std::string help,
                                  double CallGraphOptions::*member) {
  return ValueFlag<ReportOptions>(
      {std::move(name)}, "PCT", std::move(help),
      [member](ReportOptions& options, absl::string_view flag, const std::string& value) {
        double percent = 0;
        if (!absl::SimpleAtod(value, &percent) || percent < 0 || percent > 100) {
          return absl::InvalidArgumentError(
              absl::StrCat(flag, " takes a percentage from 0 to 100, not '", value, "'"));
        }
        options.graph.*member = percent / 100;
        return absl::OkStatus();
      });
}

template <typename Options>
absl::Status TakeFile(Options& options, std::string file) {
  options.files.push_back(std::move(file));
  return absl::OkStatus();
}

absl::Status CheckReport(ReportOptions& options, const FlagsGiven&) {
  if (options.files.size() != 1) {
    return absl::InvalidArgumentError(
        options.files.empty() ? "which recording? give FILE (folded, pprof .pb.gz or speedscope)"
                              : absl::StrCat("one recording at a time, not ", options.files.size(),
                                             " (pystrobe diff compares two)"));
  }
  options.file = options.files[0];
  int views =
      options.source.has_value() + options.callers.has_value() + options.callees.has_value();
  if (views > 1) {
    return absl::InvalidArgumentError("--source, --callers and --callees: one at a time");
  }
  if (options.dot + options.html + (views > 0) > 1) {
    return absl::InvalidArgumentError(
        "--dot, --html and --source/--callers/--callees: one at a time");
  }
  if ((options.dot || options.html) && options.table.json) {
    return absl::InvalidArgumentError("--json is a table's form; --dot and --html are not tables");
  }
  if (options.output && !options.dot && !options.html) {
    return absl::InvalidArgumentError("-o is where --dot or --html is written; give one of them");
  }
  return absl::OkStatus();
}

FlagTable<ReportOptions>::Spec ReportSpec() {
  std::vector<Flag<ReportOptions>> rows = TableRows<ReportOptions>({
      .by = "one row per function (default), per source line\n"
            "(line_profiler's view, nothing decorated), or per file",
      .sort = "order by self (default) or total",
      .sample_type = "which of a pprof file's values to count (e.g. cpu,\n"
                     "samples, wall, off_cpu; default: the file's default)",
  });
  // --focus goes after --top, as it always did in --help.
  rows.insert(rows.begin() + 3,
              TextFlag<ReportOptions>({"--focus"}, "REGEX",
                                      "count only stacks with a frame whose function or file\n"
                                      "matches; shares stay shares of the whole recording",
                                      &ReportOptions::focus));
  std::vector<Flag<ReportOptions>> more = {
      TextFlag<ReportOptions>({"--source"}, "FUNCTION",
                              "FUNCTION's source lines, each with its share and\n"
                              "columns, read from the file when it is found (as\n"
                              "recorded, or beside FILE)",
                              &ReportOptions::source),
      TextFlag<ReportOptions>({"--callers"}, "FUNCTION",
                              "who called FUNCTION, and with what share of its samples",
                              &ReportOptions::callers),
      TextFlag<ReportOptions>({"--callees"}, "FUNCTION",
                              "what FUNCTION called, and [self] for its own time\n"
                              "(FUNCTION: a name as in the table, or FILE:NAME)",
                              &ReportOptions::callees),
      JsonRow<ReportOptions>("one JSON object instead of the table:\n"
                             "{\"total_samples\", \"column_names\", \"columns\",\n"
                             " \"rows\": [{\"function\", \"file\", \"line\" (with --by line),\n"
                             " \"self\", \"total\", \"self_samples\", \"total_samples\",\n"
                             " \"columns\": {\"python\": share, ...},\n"
                             " \"column_samples\": {\"python\": samples, ...}}]},\n"
                             "shares as fractions of all samples"),
      SwitchFlag<ReportOptions>({"--dot"}, &ReportOptions::dot,
                                "the call graph as Graphviz dot (gprof2dot's picture:\n"
                                "render with `dot -Tsvg`): a node per function with\n"
                                "its total and self (leaf) shares, an edge per call\n"
                                "with the share of samples through it, coloured from\n"
                                "blue (little) to red (much)"),
      ThresholdFlag("--node-threshold", "--dot: leave out functions under PCT% (default 0.5)",
                    &CallGraphOptions::node_threshold),
      ThresholdFlag("--edge-threshold", "--dot: leave out calls under PCT% (default 0.1)",
                    &CallGraphOptions::edge_threshold),
      SwitchFlag<ReportOptions>({"--html"}, &ReportOptions::html,
                                "one self-contained HTML page (nothing fetched): the\n"
                                "flame graph, the lines and functions with their\n"
                                "columns, the source of the heaviest functions"),
      TextFlag<ReportOptions>({"-o", "--output"}, "FILE",
                              "where --dot or --html is written (default: stdout)",
                              &ReportOptions::output),
      HelpFlag(&ReportOptions::help, "this text"),
  };
  for (Flag<ReportOptions>& row : more) rows.push_back(std::move(row));
  return {
      .command = "report",
      .intro =
          "usage: pystrobe report FILE [options]\n"
          "\n"
          "Reads a recording pystrobe wrote (folded, pprof .pb.gz or speedscope; the\n"
          "format is told from the content) and prints where the samples went, heaviest\n"
          "first. No root needed.\n"
          "\n"
          "Each sample is charged to the innermost Python line on its stack (to its\n"
          "leaf frame when the stack has no Python: another process), so the Python\n"
          "line that called numpy's dgemm_ is the row, not dgemm_. A row's self share is\n"
          "what was charged to it, split into columns by where that time went:\n"
          "  python      the interpreter running the line (and CPython's own C code)\n"
          "  native      C extensions, BLAS, libc... called from the line\n"
          "  system      the kernel, on CPU, on behalf of the line\n"
          "  io wait, sleep/lock, runqueue, gil wait, other wait\n"
          "              off CPU and why (recordings made with --off-cpu)\n"
          "  memory      bytes (--memory, --allocations recordings)\n"
          "The columns sum to the self share; only columns with samples are shown. The\n"
          "total share counts samples with the row anywhere on the stack (cumtime).\n"
          "How a frame is told apart: pprof keeps it (a kernel mapping, a Python\n"
          "function's file, a native mapping's file); folded and speedscope keep only\n"
          "names, so there it follows pystrobe's names: \"func (file:line)\" is Python,\n"
          "\"name_[k]\" the kernel, \"[...]\" a marker (\"[io wait]\", \"[native]\"), a\n"
          "native frame in python*/libpython* (\"python3.11+0x1f2a\") or in CPython's\n"
          "API (_Py*, Py_*, PyObject_*, PyEval_*...) is the interpreter's (counted as\n"
          "python), any other name native. A folded\n"
          "--memory recording does not say it counts bytes: read its pprof file for the\n"
          "memory column.\n"
          "\n",
      .sections = {{.heading = "Options:", .flags = std::move(rows)}},
      .outro =
          "\n"
          "Exit status: 0 printed, 1 the output could not be written, 2 bad flags or a\n"
          "file that is missing or not a recording.\n",
      .help_column = 27,
      .positional = TakeFile<ReportOptions>,
      .rest = nullptr,
      .check = CheckReport,
  };
}

FlagTable<DiffOptions>::Spec DiffSpec() {
  std::vector<Flag<DiffOptions>> rows = {
      TextFlag<DiffOptions>({"-o", "--output"}, "FILE.svg",
                            "also write a differential flame graph: AFTER's stacks,\n"
                            "red where a stack's share grew, blue where it shrank,\n"
                            "deeper for bigger changes (stacks only in BEFORE are\n"
                            "in the table, not the graph)",
                            &DiffOptions::svg),
      SwitchFlag<DiffOptions>({"--html"}, &DiffOptions::html,
                              "with -o FILE.html: one self-contained HTML page\n"
                              "instead: the two flame graphs side by side, the\n"
                              "differential one and the table of changes"),
  };
  for (Flag<DiffOptions>& row : TableRows<DiffOptions>({
           .by = "one row per function (default), line or file",
        .sort = "order by the change of self (default) or total",
        .sample_type = "which pprof value to compare, in both files",
       })) {
    rows.push_back(std::move(row));
  }
  rows.push_back(
      JsonRow<DiffOptions>("one JSON object: {\"before\": {\"file\", \"total_samples\"},\n"
                           "\"after\": {...}, \"rows\": [{\"function\", \"file\", (\"line\"),\n"
                           " \"before_self\", \"after_self\", \"delta_self\",\n"
                           " \"before_total\", \"after_total\", \"delta_total\",\n"
                           " \"before_self_samples\", ...}]}, shares as fractions"));
  rows.push_back(HelpFlag(&DiffOptions::help, "this text"));
  return {
      .command = "diff",
      .intro =
          "usage: pystrobe diff BEFORE AFTER [options]\n"
          "\n"
          "Compares two recordings (folded, pprof or speedscope, in any mix), each\n"
          "normalised to its own total so that runs of different lengths compare: per\n"
          "function the self and total shares before and after and their change in\n"
          "points, biggest change first. No root needed.\n"
          "\n",
      .sections = {{.heading = "Options:", .flags = std::move(rows)}},
      .outro =
          "\n"
          "Exit status: 0 printed, 1 the SVG or page could not be written, 2 bad flags or "
          "a file\n"
          "that is missing or not a recording.\n",
      .help_column = 27,
      .positional = TakeFile<DiffOptions>,
      .rest = nullptr,
      .check =
          [](DiffOptions& options, const FlagsGiven&) {
            if (options.files.size() != 2) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "give two recordings, BEFORE and AFTER (", options.files.size(), " given)"));
            }
            options.before = options.files[0];
            options.after = options.files[1];
            if (options.html && !options.svg) {
              return absl::InvalidArgumentError("--html writes a page: give -o FILE.html");
            }
            return absl::OkStatus();
          },
  };
}

const FlagTable<ReportOptions>& ReportFlags() {
  static const FlagTable<ReportOptions>* const table = new FlagTable<ReportOptions>(ReportSpec());
  return *table;
}

const FlagTable<DiffOptions>& DiffFlags() {
  static const FlagTable<DiffOptions>* const table = new FlagTable<DiffOptions>(DiffSpec());
  return *table;
}

}  // namespace

absl::StatusOr<ReportOptions> ParseReportOptions(const std::vector<std::string>& args) {
  return ReportFlags().Parse(args);
}

absl::StatusOr<DiffOptions> ParseDiffOptions(const std::vector<std::string>& args) {
  return DiffFlags().Parse(args);
}

const char* ReportUsage() { return ReportFlags().UsageText(); }

const char* DiffUsage() { return DiffFlags().UsageText(); }

}  // namespace pystrobe

#include "daemon/accounting/top_screen.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pystrobe {
namespace {

constexpr char kClear[] = "\x1b[H\x1b[2J";
constexpr char kBold[] = "\x1b[1m";
constexpr char kReverse[] = "\x1b[7m";
constexpr char kReset[] = "\x1b[0m";

double SortKey(TopSort sort, const TopRow& row) {
  const TaskFigures& f = row.figures;
  switch (sort) {
    case TopSort::kCpu:
      return f.cpu_seconds();
    case TopSort::kIo:
      return static_cast<double>(f.read_bytes + f.write_bytes + f.block_io_bytes);
    case TopSort::kFaults:
      return static_cast<double>(f.minor_faults + f.major_faults);
    case TopSort::kOffCpu:
      return f.offcpu_io_seconds + f.offcpu_sleep_seconds + f.runqueue_seconds;
    case TopSort::kMemory:
      return static_cast<double>(row.rss_bytes);
  }
  return 0;
}

const char* SortName(TopSort sort) {
  switch (sort) {
    case TopSort::kCpu:
      return "cpu";
    case TopSort::kIo:
      return "io";
    case TopSort::kFaults:
      return "faults";
    case TopSort::kOffCpu:
      return "offcpu";
    case TopSort::kMemory:
      return "memory";
  }
  return "?";
}

std::string Rate(double per_second) {
  if (per_second >= 1e9) return absl::StrFormat("%.1fG", per_second / 1e9);
  if (per_second >= 1e6) return absl::StrFormat("%.1fM", per_second / 1e6);
  if (per_second >= 1e3) return absl::StrFormat("%.1fk", per_second / 1e3);
  return absl::StrFormat("%.0f", per_second);
}

// GPU% (the process's SM share of the interval, summed over its devices) and
// the GPU memory it holds, where NVML is; "-" for a row NVML did not list.
std::string GpuColumns(const TopScreen& screen, const TopRow& row) {
  if (!screen.gpu) return "";
  if (!row.gpu) return absl::StrFormat(" %6s %7s", "-", "-");
  return absl::StrFormat(" %6.1f %7s", 100 * row.gpu->utilization,
                         Rate(static_cast<double>(row.gpu->memory_bytes)));
}

// RSS and its growth per second (signed); "-" where the kernel has not read it.
std::string MemoryColumns(const TopRow& row) {
  if (!row.rss_known) return absl::StrFormat(" %7s %8s", "-", "-");
  if (!row.rss_growth_known) {
    return absl::StrFormat(" %7s %8s", Rate(static_cast<double>(row.rss_bytes)), "-");
  }
  double growth = row.rss_growth_per_second;
  return absl::StrFormat(" %7s %8s", Rate(static_cast<double>(row.rss_bytes)),
                         absl::StrCat(growth < 0 ? "-" : "+", Rate(growth < 0 ? -growth : growth)));
}

}  // namespace

std::vector<TopFunction> HottestFunctions(const Profile& profile, uint64_t& total) {
  absl::flat_hash_map<std::string, uint64_t> by_name;
  total = 0;
  for (const ProfileStack& stack : profile.stacks()) {
    for (size_t i = stack.frames.size(); i-- > 0;) {
      if (stack.frames[i].kind == FrameKind::kPython) {
        by_name[stack.frames[i].name] += stack.count;
        total += stack.count;
        break;
      }
    }
  }
  std::vector<TopFunction> out;
  for (const auto& [name, samples] : by_name) out.push_back({name, samples});
  std::sort(out.begin(), out.end(), [](const TopFunction& a, const TopFunction& b) {
    return a.samples != b.samples ? a.samples > b.samples : a.name < b.name;
  });
  return out;
}

void SortTopRows(TopSort sort, std::vector<TopRow>& rows) {
  std::stable_sort(rows.begin(), rows.end(), [sort](const TopRow& a, const TopRow& b) {
    double ka = SortKey(sort, a), kb = SortKey(sort, b);
    if (ka != kb) return ka > kb;
    return a.figures.cpu_seconds() > b.figures.cpu_seconds();
  });
}

std::string RenderTopScreen(TopScreen screen) {
  SortTopRows(screen.sort, screen.rows);
  double dt = screen.interval_seconds > 0 ? screen.interval_seconds : 1;
  double cpu_total = 0, read_total = 0, write_total = 0, block_total = 0, faults_total = 0;
  double gil_total = 0, gc_total = 0, rss_total = 0;
  for (const TopRow& row : screen.rows) {
    rss_total += row.rss_bytes;
    cpu_total += row.figures.cpu_seconds();
    read_total += row.figures.read_bytes;
    write_total += row.figures.write_bytes;
    block_total += row.figures.block_io_bytes;
    faults_total += row.figures.minor_faults + row.figures.major_faults;
    gil_total += row.figures.gil_wait_seconds;
    gc_total += row.figures.gc_seconds;
  }
  if (screen.resident_bytes) rss_total = static_cast<double>(*screen.resident_bytes);
  std::string out = screen.clear ? kClear : "";
  absl::StrAppend(&out, kBold, "pystrobe top", kReset, " - ", screen.title,
                  absl::StrFormat(" - %.1f s interval, %d CPUs, sorted by %s\n", dt, screen.cpus,
                                  SortName(screen.sort)));
  absl::StrAppend(
      &out, absl::StrFormat("CPU %.1f%% of one CPU, read %sB/s, write %sB/s, block IO %sB/s, "
                            "faults %s/s, GIL wait %.1f%%, GC %.1f%%, resident %sB\n\n",
                            100 * cpu_total / dt, Rate(read_total / dt), Rate(write_total / dt),
                            Rate(block_total / dt), Rate(faults_total / dt), 100 * gil_total / dt,
                            100 * gc_total / dt, Rate(rss_total)));
  for (const GpuDeviceFigures& d : screen.gpu_devices) {
    absl::StrAppend(
        &out, absl::StrFormat("GPU %d %s: %.1f%% busy, memory %sB of %sB\n", d.index, d.name,
                              100 * d.utilization, Rate(static_cast<double>(d.memory_used_bytes)),
                              Rate(static_cast<double>(d.memory_total_bytes))));
  }
  if (!screen.gpu_devices.empty()) absl::StrAppend(&out, "\n");
  bool threads = !screen.rows.empty() && screen.rows.front().tid != 0;
  absl::StrAppend(
      &out, kReverse,
      absl::StrFormat("%8s %-16s %6s %6s %8s %8s %8s %8s %6s %6s %6s %5s %5s %7s",
                      threads ? "TID" : "PID", "COMM", "USR%", "SYS%", "READ/s", "WRITE/s", "BIO/s",
                      "FLT/s", "RUNQ%", "IOW%", "SLEEP%", "GIL%", "GC%", "CSW/s"),
      threads ? "" : absl::StrFormat(" %7s %8s", "RSS", "RSS/s"),
      screen.gpu ? absl::StrFormat(" %6s %7s", "GPU%", "GPUMEM") : "", kReset, "\n");
  int shown = 0;
  for (const TopRow& row : screen.rows) {
    if (shown++ >= screen.max_rows) break;
    const TaskFigures& f = row.figures;
    absl::StrAppend(
        &out, absl::StrFormat(
                  "%8d %-16s %6.1f %6.1f %8s %8s %8s %8s %6.1f %6.1f %6.1f %5s %5.1f %7s%s%s%s\n",
                  threads ? row.tid : row.pid, row.comm.substr(0, 16),
                  100 * f.cpu_user_seconds / dt, 100 * f.cpu_system_seconds / dt,
                  Rate(f.read_bytes / dt), Rate(f.write_bytes / dt), Rate(f.block_io_bytes / dt),
                  Rate((f.minor_faults + f.major_faults) / dt), 100 * f.runqueue_seconds / dt,
                  100 * f.offcpu_io_seconds / dt, 100 * f.offcpu_sleep_seconds / dt,
                  row.free_threaded ? "-" : absl::StrFormat("%.1f", 100 * f.gil_wait_seconds / dt),
                  100 * f.gc_seconds / dt, Rate(f.context_switches() / dt),
                  threads ? "" : MemoryColumns(row), GpuColumns(screen, row),
                  row.exited ? " (exited)" : ""));
  }
  absl::StrAppend(&out, "\n", kBold, "Hottest Python functions", kReset,
                  absl::StrFormat(" (%d samples this interval)\n", screen.function_samples));
  if (screen.functions.empty()) absl::StrAppend(&out, "  (none sampled)\n");
  for (size_t i = 0; i < screen.functions.size() && i < 10; ++i) {
    const TopFunction& fn = screen.functions[i];
    double share = screen.function_samples ? 100.0 * fn.samples / screen.function_samples : 0;
    absl::StrAppend(&out, absl::StrFormat("  %5.1f%%  %s\n", share, fn.name));
  }
  return out;
}

void ResidentGrowth::Observe(Key key, double interval_seconds, TopRow& row) {
  auto [before, first] = seen_.try_emplace(key, row.rss_bytes);
  if (row.rss_known && !first && interval_seconds > 0) {
    row.rss_growth_known = true;
    row.rss_growth_per_second =
        (static_cast<double>(row.rss_bytes) - static_cast<double>(before->second)) /
        interval_seconds;
  }
  before->second = row.rss_bytes;
}

double ResidentGrowth::Observe(Key key, double interval_seconds, uint64_t resident_bytes) {
  TopRow row;
  row.rss_known = true;
  row.rss_bytes = resident_bytes;
  Observe(key, interval_seconds, row);
  return row.rss_growth_per_second;
}

std::string ProcessRssTitle(uint64_t resident_bytes, double growth_per_second) {
  return absl::StrFormat(", RSS %.1f MiB (%+.1f MiB/s)", resident_bytes / 1048576.0,
                         growth_per_second / 1048576.0);
}

}  // namespace pystrobe

#include "daemon/cli/remote_accounting.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/accounting/process_counters.h"
#include "daemon/cli/exit_status.h"
#include "daemon/cli/raw_keys.h"
#include "daemon/service/signals.h"

namespace pystrobe {
namespace {

constexpr size_t kCounterFields = sizeof(pystrobe_task_counters) / sizeof(uint64_t);

void PrintInfo(const std::string& line) { fprintf(stderr, "pystrobe: %s\n", line.c_str()); }

}  // namespace

void AddGpuFigures(const TopSnapshot& snapshot, TopScreen& screen) {
  if (!snapshot.gpu) return;
  screen.gpu = true;
  for (const TopSnapshotGpuDevice& d : snapshot.gpu_devices) {
    screen.gpu_devices.push_back({.index = d.index,
                                  .name = d.name,
                                  .utilization = d.utilization,
                                  .memory_used_bytes = d.memory_used_bytes,
                                  .memory_used_peak_bytes = d.memory_used_bytes,
                                  .memory_total_bytes = d.memory_total_bytes});
  }
  absl::flat_hash_map<uint32_t, const TopSnapshotGpuProcess*> by_pid;
  for (const TopSnapshotGpuProcess& p : snapshot.gpu_processes) by_pid[p.pid] = &p;
  // Thread rows (top --pid): the process's figures go in the title, as locally.
  bool per_thread = !screen.rows.empty() && screen.rows.front().tid != 0;
  if (auto it = by_pid.find(per_thread ? screen.rows.front().pid : 0); it != by_pid.end()) {
    absl::StrAppend(&screen.title,
                    absl::StrFormat(", GPU %.1f%%, GPU memory %d MiB",
                                    100 * it->second->utilization, it->second->memory_bytes >> 20));
  }
  for (TopRow& row : screen.rows) {
    auto it = by_pid.find(row.pid);
    if (row.tid != 0 || it == by_pid.end()) continue;
    row.gpu.emplace();
    row.gpu->utilization = it->second->utilization;
    row.gpu->memory_bytes = it->second->memory_bytes;
  }
}

std::vector<TopRow> TopRowsFrom(const TopSnapshot& snapshot, ResidentGrowth& rss_growth) {
  std::vector<TopRow> rows;
  rows.reserve(snapshot.rows.size());
  for (const TopSnapshotRow& in : snapshot.rows) {
    pystrobe_task_counters raw = {};
    if (in.counters.size() == kCounterFields) {
      std::memcpy(&raw, in.counters.data(), sizeof(raw));
    }
    TopRow row;
    row.pid = in.pid;
    row.tid = in.tid;
    row.comm = in.comm;
    row.exited = in.exited;
    row.free_threaded = in.free_threaded;
    row.figures = FiguresFrom(raw);
    row.rss_known = in.rss_known;
    row.rss_bytes = in.rss_bytes;
    // The daemon's rows do not carry the process's start: a pid reused
    // between two screens reads as growth once.
    if (in.tid == 0) rss_growth.Observe({in.pid, 0}, snapshot.interval_seconds, row);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::optional<int> MaybeStatThroughDaemon(const StatOptions& options,
                                          const DaemonClientFlags& flags) {
  if (flags.no_daemon || !options.command.empty() || !options.pid) return std::nullopt;
  if (options.syscalls) {
    fprintf(stderr,
            "pystrobe stat: the daemon does not trace syscalls: measuring --syscalls locally\n");
    return std::nullopt;
  }
  if (options.allocations) {
    fprintf(stderr,
            "pystrobe stat: the daemon does not sample allocations: measuring --allocations "
            "locally\n");
    return std::nullopt;
  }
  absl::StatusOr<int> fd = ConnectToDaemon(flags.socket);
  if (!fd.ok()) return std::nullopt;
  fprintf(stderr, "pystrobe: using the running daemon (%s)\n", flags.socket.c_str());
  StatRequest request;
  request.pid = *options.pid;
  // Without -d, until the process ends or Ctrl-C (kStop).
  request.duration =
      options.duration ? std::min(*options.duration, kMaxRemoteRecording) : kMaxRemoteRecording;
  request.json = options.json;
  Signals::Install();
  absl::StatusOr<std::string> report = RequestThroughDaemon(
      *fd, ControlMessageType::kStat, EncodeStatRequest(request), PrintInfo, &Signals::stop_flag());
  close(*fd);
  if (!report.ok()) {
    fprintf(stderr, "pystrobe stat: the daemon (%s): %s\n", flags.socket.c_str(),
            std::string(report.status().message()).c_str());
    return kExitFailure;
  }
  fputs(report->c_str(), stdout);
  fflush(stdout);
  return kExitOk;
}

std::optional<int> MaybeTopThroughDaemon(const TopOptions& given, const DaemonClientFlags& flags) {
  if (flags.no_daemon) return std::nullopt;
  absl::StatusOr<int> fd = ConnectToDaemon(flags.socket);
  if (!fd.ok()) return std::nullopt;
  fprintf(stderr, "pystrobe: using the running daemon (%s)\n", flags.socket.c_str());
  TopOptions options = given;
  Signals::Install();
  RawKeys keys;
  bool tty = isatty(STDOUT_FILENO);
  TopRequest request;
  request.pid = options.pid;
  request.interval = std::clamp(options.interval, kMinTopInterval, kMaxTopInterval);
  // Keys while the daemon measures: q ends top, c/i/f/o change the sort.
  auto on_key = [&] {
    std::optional<char> key = keys.Read();
    if (!key) return;
    if (*key == 'q') {
      Signals::RequestStop(SIGTERM);
    } else if (std::optional<TopSort> sort = TopSortForKey(*key)) {
      options.sort = *sort;
    }
  };
  bool first = true;
  ResidentGrowth rss_growth;
  while (!Signals::StopRequested()) {
    if (!first) {
      fd = ConnectToDaemon(flags.socket);
      if (!fd.ok()) {
        fprintf(stderr, "pystrobe top: the daemon (%s) went away: %s\n", flags.socket.c_str(),
                std::string(fd.status().message()).c_str());
        return kExitFailure;
      }
    }
    absl::StatusOr<std::string> answer = RequestThroughDaemon(
        *fd, ControlMessageType::kTop, EncodeTopRequest(request),
        first ? PrintInfo : [](const std::string&) {}, &Signals::stop_flag(), on_key);
    close(*fd);
    first = false;
    if (Signals::StopRequested()) break;
    absl::StatusOr<TopSnapshot> snapshot =
        answer.ok() ? DecodeTopSnapshot(*answer, kCounterFields) : answer.status();
    if (!snapshot.ok()) {
      fprintf(stderr, "pystrobe top: the daemon (%s): %s\n", flags.socket.c_str(),
              std::string(snapshot.status().message()).c_str());
      return kExitFailure;
    }
    TopScreen screen;
    screen.title = absl::StrCat(snapshot->title, " (from the daemon)");
    screen.interval_seconds = snapshot->interval_seconds;
    screen.cpus = static_cast<int>(snapshot->cpus);
    screen.sort = options.sort;
    screen.max_rows = options.rows;
    screen.clear = tty && !options.once;
    if (snapshot->process_rss_known && options.pid) {
      screen.resident_bytes = snapshot->process_rss_bytes;
      absl::StrAppend(
          &screen.title,
          ProcessRssTitle(snapshot->process_rss_bytes,
                          rss_growth.Observe({*options.pid, 0}, snapshot->interval_seconds,
                                             snapshot->process_rss_bytes)));
    }
    screen.rows = TopRowsFrom(*snapshot, rss_growth);
    AddGpuFigures(*snapshot, screen);
    for (const TopSnapshotFunction& fn : snapshot->functions) {
      screen.functions.push_back({fn.name, fn.samples});
    }
    screen.function_samples = snapshot->function_samples;
    std::string text = RenderTopScreen(std::move(screen));
    fputs(text.c_str(), stdout);
    fflush(stdout);
    if (options.once) break;
    if (options.pid && kill(static_cast<pid_t>(*options.pid), 0) != 0 && errno != EPERM) break;
  }
  return kExitOk;
}

}  // namespace pystrobe

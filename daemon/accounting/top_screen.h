// One screen of `pystrobe top`: rows of per-interval figures, sorted, and
// the hottest Python functions, in plain ANSI.
#ifndef PYSTROBE_DAEMON_ACCOUNTING_TOP_SCREEN_H_
#define PYSTROBE_DAEMON_ACCOUNTING_TOP_SCREEN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/accounting/process_counters.h"
#include "daemon/gpu/gpu_figures.h"
#include "model/profile.h"

namespace pystrobe {

enum class TopSort { kCpu, kIo, kFaults, kOffCpu, kMemory };

// The sort a key typed in top selects (c, i, f, o, m), or none.
inline std::optional<TopSort> TopSortForKey(char key) {
  switch (key) {
    case 'c':
      return TopSort::kCpu;
    case 'i':
      return TopSort::kIo;
    case 'f':
      return TopSort::kFaults;
    case 'o':
      return TopSort::kOffCpu;
    case 'm':
      return TopSort::kMemory;
  }
  return std::nullopt;
}

struct TopRow {
  uint32_t pid = 0;
  uint32_t tid = 0;  // 0 on a process row
  std::string comm;
  TaskFigures figures;  // over the interval (block IO and GC included)
  bool exited = false;
  // A free-threaded CPython: no GIL to wait for (its GIL column says so).
  bool free_threaded = false;
  // Resident memory at the end of the interval and how fast it grew over it
  // (process rows; rss_known: the kernel has read it; rss_growth_known: it
  // had at the last screen too).
  bool rss_known = false;
  uint64_t rss_bytes = 0;
  bool rss_growth_known = false;
  double rss_growth_per_second = 0;
  // NVML's figures for the process over the interval (process rows), none
  // when NVML did not list it.
  std::optional<GpuProcessFigures> gpu;
};

struct TopFunction {
  std::string name;  // "function (file:line)"
  uint64_t samples = 0;
};

struct TopScreen {
  std::string title;  // "all processes" or "pid 1234 (python3)"
  double interval_seconds = 1;
  int cpus = 1;
  TopSort sort = TopSort::kCpu;
  int max_rows = 20;
  std::vector<TopRow> rows;
  // The process's resident bytes on a per-thread screen, whose rows (its
  // threads) carry none; unset, the rows' sum.
  std::optional<uint64_t> resident_bytes;
  std::vector<TopFunction> functions;  // heaviest first
  uint64_t function_samples = 0;       // samples behind `functions`
  bool clear = false;                  // start with "clear screen"
  // NVML is there: GPU% and GPU memory columns, and a line per device.
  bool gpu = false;
  std::vector<GpuDeviceFigures> gpu_devices;
};

// The leaf Python function of each stack of `profile`, by samples, heaviest
// first; `total` is the samples behind them.
std::vector<TopFunction> HottestFunctions(const Profile& profile, uint64_t& total);

// Each process's resident bytes at the last screen, for its growth per
// second on the next: the same for a local top and one the daemon answers.
class ResidentGrowth {
 public:
  using Key = std::pair<uint32_t, uint64_t>;  // pid, and its start time where known
  // Notes `row`'s resident bytes under `key` and sets its growth since the
  // last screen (none on the process's first).
  void Observe(Key key, double interval_seconds, TopRow& row);
  // The process's growth per second (0 on its first screen), noting it.
  double Observe(Key key, double interval_seconds, uint64_t resident_bytes);
  void Forget(Key key) { seen_.erase(key); }

 private:
  absl::flat_hash_map<Key, uint64_t> seen_;
};

// ", RSS 1.5 MiB (+0.2 MiB/s)": the process's memory in a per-thread title.
std::string ProcessRssTitle(uint64_t resident_bytes, double growth_per_second);

// Sorts rows by the screen's key, heaviest first.
void SortTopRows(TopSort sort, std::vector<TopRow>& rows);
std::string RenderTopScreen(TopScreen screen);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_ACCOUNTING_TOP_SCREEN_H_

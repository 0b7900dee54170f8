#include "daemon/loader/cpu_clock_events.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace pystrobe {

absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text) {
  std::vector<int> cpus;
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return absl::InvalidArgumentError("empty CPU list");
  for (absl::string_view range : absl::StrSplit(text, ',')) {
    size_t dash = range.find('-');
    absl::string_view low = range.substr(0, dash);
    absl::string_view high = dash == absl::string_view::npos ? low : range.substr(dash + 1);
    int first = 0;
    int last = 0;
    if (!absl::SimpleAtoi(low, &first) || !absl::SimpleAtoi(high, &last) || first < 0 ||
        last < first || last > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad CPU range '", range, "' in '", text, "'"));
    }
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

absl::StatusOr<std::vector<int>> OnlineCpus() {
  constexpr char kPath[] = "/sys/devices/system/cpu/online";
  std::ifstream file(kPath);
  std::stringstream text;
  text << file.rdbuf();
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", kPath));
  absl::StatusOr<std::vector<int>> cpus = ParseCpuList(text.str());
  if (!cpus.ok()) return absl::InternalError(absl::StrCat(kPath, ": ", cpus.status().message()));
  return cpus;
}

absl::StatusOr<CpuClockEvents> CpuClockEvents::Open(const std::vector<int>& cpus, int rate_hz) {
  CpuClockEvents result;
  for (int cpu : cpus) {
    perf_event_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    // A period, not a frequency: the sampling clock redraws it at random
    // (SamplingClock); this is where each CPU starts.
    attr.sample_period = MeanPeriodNs(rate_hz);
    int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, /*pid=*/-1, cpu, /*group_fd=*/-1,
                                      PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      int err = errno;
      std::string where = absl::StrCat("open cpu-clock perf event on cpu ", cpu, ": ");
      if (err == EACCES || err == EPERM) {
        return absl::PermissionDeniedError(
            absl::StrCat(where, std::strerror(err),
                         " (needs CAP_PERFMON or root; kernel.perf_event_paranoid may forbid it)"));
      }
      if (err == ENOENT || err == ENODEV || err == EOPNOTSUPP) {
        return absl::UnavailableError(absl::StrCat(
            where, "this kernel has no software cpu-clock perf events (", std::strerror(err), ")"));
      }
      if (err == EINVAL && rate_hz > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "rate ", rate_hz, " Hz refused (see kernel.perf_event_max_sample_rate)"));
      }
      return absl::InternalError(absl::StrCat(where, std::strerror(err)));
    }
    result.events_.push_back(Event{cpu, fd});
  }
  return result;
}

absl::Status CpuClockEvents::SetPeriod(const Event& event, uint64_t period_ns) const {
  // The kernel restarts the CPU's timer: the next tick comes period_ns from now.
  if (ioctl(event.fd, PERF_EVENT_IOC_PERIOD, &period_ns) != 0) {
    return absl::InternalError(absl::StrCat("set the cpu-clock period of cpu ", event.cpu, " to ",
                                            period_ns, " ns: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

CpuClockEvents::CpuClockEvents(CpuClockEvents&& other) noexcept
    : events_(std::exchange(other.events_, {})) {}

CpuClockEvents& CpuClockEvents::operator=(CpuClockEvents&& other) noexcept {
  if (this != &other) {
    Close();
    events_ = std::exchange(other.events_, {});
  }
  return *this;
}

CpuClockEvents::~CpuClockEvents() { Close(); }

void CpuClockEvents::Close() {
  for (const Event& event : events_) close(event.fd);
  events_.clear();
}

}  // namespace pystrobe

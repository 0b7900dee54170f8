#include "daemon/service/self_metrics.h"

#include <unistd.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daemon/loader/drop_reasons.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/small_file.h"
#include "daemon/procfs/stat.h"
#include "daemon/service/metrics_snapshot.h"

namespace pystrobe {

SelfUsage ReadSelfUsage() {
  SelfUsage usage;
  if (absl::StatusOr<procfs::StatLine> stat = procfs::ReadStat(procfs::PidPath("self", "stat"));
      stat.ok()) {
    // utime and stime, in clock ticks.
    double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    if (std::optional<uint64_t> user = stat->Number(14)) usage.cpu_user_seconds = *user / ticks;
    if (std::optional<uint64_t> system = stat->Number(15)) {
      usage.cpu_system_seconds = *system / ticks;
    }
  }
  // "size resident shared text lib data dirty", in pages.
  std::string statm = procfs::ReadSmallFile(procfs::PidPath("self", "statm")).value_or("");
  std::vector<absl::string_view> pages = absl::StrSplit(statm, ' ', absl::SkipEmpty());
  uint64_t resident_pages = 0;
  if (pages.size() >= 2 && absl::SimpleAtoi(pages[1], &resident_pages)) {
    usage.resident_bytes = resident_pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }
  return usage;
}

std::vector<prometheus::MetricFamily> SelfMetricFamilies(
    const DaemonHealth& health, const std::map<std::string, std::string>& static_labels) {
  using Labels = std::vector<prometheus::ClientMetric::Label>;
  Labels statics;
  for (const auto& [name, value] : static_labels) statics.push_back({name, value});
  auto with = [&](Labels labels) {
    labels.insert(labels.end(), statics.begin(), statics.end());
    return labels;
  };
  std::vector<prometheus::MetricFamily> families;
  auto counter = [&](const char* name, const char* help, double value) {
    families.push_back(CounterFamily(name, help));
    AddSample(families.back(), value, statics);
  };
  auto gauge = [&](const char* name, const char* help, double value) {
    families.push_back(GaugeFamily(name, help));
    AddSample(families.back(), value, statics);
  };
  const SamplerCounters& s = health.sampler;

  counter("pystrobe_samples_taken_total", "cpu-clock samples taken in the kernel, before filters.",
          static_cast<double>(s.taken));
  counter("pystrobe_samples_total", "Samples sent to userspace.", static_cast<double>(s.sent));
  counter("pystrobe_samples_idle_total", "Samples of idle CPUs, not sent.",
          static_cast<double>(s.idle));
  counter("pystrobe_samples_filtered_total", "Samples of processes outside the targets.",
          static_cast<double>(s.filtered));
  counter("pystrobe_python_samples_total", "Samples with a walk of CPython frames.",
          static_cast<double>(s.python_walked));
  counter("pystrobe_python_processes_at_exec_total",
          "Processes walked as CPython from their exec: their executable was known.",
          static_cast<double>(s.python_at_exec));
  counter("pystrobe_python_code_copies_total",
          "Code objects the kernel copied out of CPython processes, to name their frames "
          "after the code or the process is gone.",
          static_cast<double>(s.python_codes_sent));
  counter("pystrobe_python_code_copy_seconds_total",
          "In-kernel time spent copying code objects and sending the copies.",
          static_cast<double>(s.python_code_copy_ns) / 1e9);
  counter("pystrobe_python_code_copies_deferred_total",
          "Code object copies put off to a later sample by the kernel's per-CPU copy budget or a "
          "read that faulted.",
          static_cast<double>(s.python_codes_deferred));
  counter("pystrobe_python_codes_named_from_copies_total",
          "Code objects named from the kernel's copies rather than read from their process.",
          static_cast<double>(health.python_codes_from_copies));
  counter("pystrobe_offcpu_intervals_total", "Off-CPU intervals sent with their stacks.",
          static_cast<double>(s.offcpu_sent));
  families.push_back(CounterFamily(
      "pystrobe_native_walks_total",
      "Native stacks walked in the kernel with unwind tables, by how they ended: complete (the "
      "outermost frame), jit (in JIT code without a way on), truncated (too deep); through_jit "
      "counts walks that went on past JIT code. Failed walks are in pystrobe_dropped_total."));
  AddSample(families.back(), static_cast<double>(s.native_complete),
            with({{"outcome", "complete"}}));
  AddSample(families.back(), static_cast<double>(s.native_jit), with({{"outcome", "jit"}}));
  AddSample(families.back(), static_cast<double>(s.native_truncated),
            with({{"outcome", "truncated"}}));
  AddSample(families.back(), static_cast<double>(s.native_through_jit),
            with({{"outcome", "through_jit"}}));
  families.push_back(CounterFamily(
      "pystrobe_sampling_period_redraws_total",
      "Random redraws of a CPU's sampling period, by outcome; a failed one leaves that CPU at "
      "its previous period until the next."));
  AddSample(families.back(), static_cast<double>(s.period_redraws), with({{"outcome", "set"}}));
  AddSample(families.back(), static_cast<double>(s.period_redraws_failed),
            with({{"outcome", "failed"}}));

  families.push_back(CounterFamily(
      "pystrobe_dropped_total",
      "What was lost or left out, by reason. Every drop the daemon knows of is here."));
  auto drop = [&](std::string_view reason, uint64_t value) {
    AddSample(families.back(), static_cast<double>(value), with({{"reason", std::string(reason)}}));
  };
  for (const DropReason& kernel_drop : kDropReasons) {
    drop(kernel_drop.metric_label, s.dropped[kernel_drop.reason]);
  }
  drop("python_walk_truncated", s.python_truncated);
  drop("accounting_process_map_full", health.accounting.process_map_full);
  drop("accounting_thread_map_full", health.accounting.thread_map_full);
  drop("accounting_no_thread_state", health.accounting.no_thread_state);
  drop("malformed_record", health.malformed_records);
  drop("window_stack_limit", health.samples_over_stack_limit);
  drop("tracked_process_limit", health.samples_of_refused_processes);
  drop("python_code_unreadable", health.python_code_read_errors);
  drop("python_code_copy_overflow", health.python_code_copies_dropped);
  drop("push_queue_full", health.push.dropped_queue_full);
  drop("push_shutdown", health.push.dropped_shutdown);
  drop("push_rejected", health.push.rejected);
  drop("push_failed", health.push.failed);

  families.push_back(CounterFamily(
      "pystrobe_cache_evictions_total",
      "Entries dropped from the symbolization caches to stay within their bounds, by cache."));
  AddSample(families.back(), static_cast<double>(health.native_name_evictions),
            with({{"cache", "native_names"}}));
  AddSample(families.back(), static_cast<double>(health.python_code_evictions),
            with({{"cache", "python_codes"}}));
  families.push_back(GaugeFamily("pystrobe_cache_entries", "Entries in each symbolization cache."));
  AddSample(families.back(), static_cast<double>(health.native_names),
            with({{"cache", "native_names"}}));
  AddSample(families.back(), static_cast<double>(health.python_codes),
            with({{"cache", "python_codes"}}));
  AddSample(families.back(), static_cast<double>(health.process_images),
            with({{"cache", "process_images"}}));
  counter("pystrobe_process_images_evicted_total",
          "Images of exited processes forgotten after their last window was written.",
          static_cast<double>(health.images_evicted));
  gauge("pystrobe_live_processes", "Live sampled processes the daemon keeps symbols for.",
        static_cast<double>(health.live_processes));
  gauge("pystrobe_python_processes", "Sampled processes found to run CPython.",
        static_cast<double>(health.python_processes));
  counter("pystrobe_python_processes_not_read_total",
          "Processes whose CPython was seen but not read (an unsupported version, memory the "
          "daemon may not read, a runtime still unreadable at its last look): their samples "
          "have native frames only.",
          static_cast<double>(health.python_not_read));
  gauge("pystrobe_window_stacks", "Distinct stacks in the window being recorded.",
        static_cast<double>(health.window_stacks));
  gauge("pystrobe_native_unwind_tables",
        "Native unwind tables loaded in the kernel (one per binary).",
        static_cast<double>(health.unwind_tables));
  gauge("pystrobe_native_unwind_table_bytes",
        "Kernel memory the native unwind tables' rows and page entries take.",
        static_cast<double>(health.unwind_table_bytes));
  gauge("pystrobe_native_unwind_table_budget_bytes",
        "Kernel memory set aside for native unwind tables; when full, the tables walked "
        "least recently are evicted.",
        static_cast<double>(health.unwind_table_budget_bytes));
  counter("pystrobe_native_unwind_tables_evicted_total",
          "Native unwind tables taken out of the kernel for room (loaded again when walked).",
          static_cast<double>(health.unwind_tables_evicted));
  counter("pystrobe_native_unwind_table_build_seconds_total",
          "CPU time spent building native unwind tables from binaries' call frame information.",
          health.unwind_table_build_seconds);

  families.push_back(GaugeFamily("pystrobe_bpf_map_entries", "Entries in each BPF hash map."));
  for (const BpfSampler::MapFill& map : health.maps) {
    AddSample(families.back(), map.entries, with({{"map", map.name}}));
  }
  families.push_back(GaugeFamily("pystrobe_bpf_map_max_entries", "Capacity of each BPF hash map."));
  for (const BpfSampler::MapFill& map : health.maps) {
    AddSample(families.back(), map.max_entries, with({{"map", map.name}}));
  }

  counter("pystrobe_windows_total", "Profiling windows cut.", static_cast<double>(health.windows));
  families.push_back(
      CounterFamily("pystrobe_window_sink_errors_total", "Windows a sink failed to take."));
  for (const auto& [sink, errors] : health.sink_errors) {
    AddSample(families.back(), static_cast<double>(errors), with({{"sink", sink}}));
  }
  if (health.sink_errors.empty()) families.pop_back();
  counter("pystrobe_memory_pressure_cuts_total",
          "Windows cut early because the daemon neared limits.memory.",
          static_cast<double>(health.memory_pressure_cuts));
  families.push_back(CounterFamily("pystrobe_profile_files_deleted_total",
                                   "Profiles deleted by the retention, by reason (age, size)."));
  AddSample(families.back(), static_cast<double>(health.profile_files_deleted_age),
            with({{"reason", "age"}}));
  AddSample(families.back(), static_cast<double>(health.profile_files_deleted_size),
            with({{"reason", "size"}}));
  gauge("pystrobe_profile_files", "Profiles in the profile directory.",
        static_cast<double>(health.profile_files));
  gauge("pystrobe_profile_dir_bytes", "Total size of the profiles in the profile directory.",
        static_cast<double>(health.profile_dir_bytes));
  // Both exporters' series, Pyroscope's first: exporter="pyroscope"
  // (exporters.push) and exporter="otlp" (exporters.otlp).
  const std::pair<const char*, const PushHealth*> exporters[] = {{"pyroscope", &health.push},
                                                                 {"otlp", &health.otlp}};
  families.push_back(CounterFamily(
      "pystrobe_push_windows_total",
      "Windows pushed to a profile store, by exporter (pyroscope, otlp) and outcome (sent, "
      "rejected, failed, dropped_queue_full, dropped_shutdown)."));
  for (const auto& [exporter, push] : exporters) {
    for (const auto& [outcome, value] : {std::pair<const char*, uint64_t>{"sent", push->sent},
                                         {"rejected", push->rejected},
                                         {"failed", push->failed},
                                         {"dropped_queue_full", push->dropped_queue_full},
                                         {"dropped_shutdown", push->dropped_shutdown}}) {
      AddSample(families.back(), static_cast<double>(value),
                with({{"exporter", exporter}, {"outcome", outcome}}));
    }
  }
  auto per_exporter = [&](prometheus::MetricFamily family, uint64_t PushHealth::*field) {
    families.push_back(std::move(family));
    for (const auto& [exporter, push] : exporters) {
      AddSample(families.back(), static_cast<double>(push->*field), with({{"exporter", exporter}}));
    }
  };
  per_exporter(CounterFamily("pystrobe_push_retries_total",
                             "Push requests retried (attempts after the first), by exporter."),
               &PushHealth::retried);
  per_exporter(CounterFamily("pystrobe_push_rejected_profiles_total",
                             "Profiles a store refused from requests it otherwise took (OTLP "
                             "partial_success.rejected_profiles), by exporter."),
               &PushHealth::rejected_items);
  std::string reasons;
  for (size_t i = 0; i < kPushErrorReasons; ++i) {
    absl::StrAppend(&reasons, i == 0 ? "" : ", ",
                    PushErrorReasonLabel(static_cast<PushErrorReason>(i)));
  }
  families.push_back(CounterFamily(
      "pystrobe_push_errors_total",
      absl::StrCat("Push attempts that failed, retried or not, by exporter and reason (", reasons,
                   ").")));
  for (const auto& [exporter, push] : exporters) {
    for (size_t i = 0; i < push->errors.size(); ++i) {
      AddSample(families.back(), static_cast<double>(push->errors[i]),
                with({{"exporter", exporter},
                      {"reason", PushErrorReasonLabel(static_cast<PushErrorReason>(i))}}));
    }
  }
  per_exporter(GaugeFamily("pystrobe_push_queue_windows",
                           "Windows waiting to be pushed, including one being sent, by exporter."),
               &PushHealth::queued);
  per_exporter(CounterFamily("pystrobe_push_bytes_total",
                             "Request bodies of the windows pushed successfully, by exporter."),
               &PushHealth::bytes_sent);
  // The control socket: always exported (zeros when it is not served), so
  // dashboards and rate() see every series from the start.
  ControlServer::Stats control = health.control.value_or(ControlServer::Stats());
  gauge("pystrobe_control_socket_up",
        "1 when the control socket (record, stat, top through the daemon) is served, else 0.",
        health.control ? 1 : 0);
  counter("pystrobe_control_connections_total", "Connections accepted on the control socket.",
          static_cast<double>(control.connections));
  gauge("pystrobe_control_connections_open", "Control socket connections being served now.",
        control.open_connections);
  families.push_back(CounterFamily(
      "pystrobe_control_requests_total",
      "Control socket requests by kind (record, stat, top; unknown when turned away before it "
      "was read) and outcome (ok, malformed, permission_denied, busy, abandoned, error)."));
  for (int k = 0; k < kControlRequestKinds; ++k) {
    auto kind = static_cast<ControlRequestKind>(k);
    for (int o = 0; o < kControlOutcomes; ++o) {
      auto outcome = static_cast<ControlOutcome>(o);
      if (!ControlOutcomePossible(kind, outcome)) continue;
      AddSample(
          families.back(), static_cast<double>(control.Requests(kind, outcome)),
          with({{"kind", ControlRequestKindName(kind)}, {"outcome", ControlOutcomeName(outcome)}}));
    }
  }
  counter("pystrobe_config_reloads_total", "Configurations applied on SIGHUP.",
          static_cast<double>(health.config_reloads));
  counter("pystrobe_config_reload_errors_total",
          "Configurations rejected on SIGHUP (the running one stayed).",
          static_cast<double>(health.config_reload_errors));
  gauge("pystrobe_window_seconds", "The window length in force.", health.window_seconds);
  gauge("pystrobe_sample_rate_hertz", "Samples per second per CPU in force.", health.rate_hz);

  families.push_back(CounterFamily("pystrobe_cpu_seconds_total",
                                   "The daemon's own CPU time, by mode (user, system)."));
  AddSample(families.back(), health.usage.cpu_user_seconds, with({{"mode", "user"}}));
  AddSample(families.back(), health.usage.cpu_system_seconds, with({{"mode", "system"}}));
  gauge("pystrobe_resident_memory_bytes", "The daemon's resident memory (RSS).",
        static_cast<double>(health.usage.resident_bytes));
  gauge("pystrobe_memory_limit_bytes", "limits.memory in force.",
        static_cast<double>(health.memory_limit_bytes));
  return families;
}

}  // namespace pystrobe

#include "daemon/accounting/stat_report.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "exporters/json_string.h"

namespace pystrobe {
namespace {

std::string Seconds(double s) { return absl::StrFormat("%.6f", s); }

std::string Bytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return absl::StrFormat("%.2f GiB", bytes / double(1ull << 30));
  if (bytes >= (1ull << 20)) return absl::StrFormat("%.2f MiB", bytes / double(1ull << 20));
  if (bytes >= (1ull << 10)) return absl::StrFormat("%.2f KiB", bytes / double(1ull << 10));
  return absl::StrCat(bytes, " B");
}

// NVML's figures: the process's (null when NVML did not list it) and each
// device's, with the process's share of it.
void AppendGpuJson(const StatReport& r, std::vector<std::string>& fields) {
  const GpuProcessFigures* p = r.gpu ? &*r.gpu : nullptr;
  fields.push_back(
      absl::StrCat("\"gpu_utilization\":", p ? absl::StrFormat("%.4f", p->utilization) : "null"));
  fields.push_back(
      absl::StrCat("\"gpu_memory_bytes\":", p ? absl::StrCat(p->memory_bytes) : "null"));
  fields.push_back(
      absl::StrCat("\"gpu_memory_peak_bytes\":", p ? absl::StrCat(p->memory_peak_bytes) : "null"));
  fields.push_back(absl::StrCat("\"gpu_utilization_from_device\":",
                                p && p->utilization_from_device ? "true" : "false"));
  std::vector<std::string> devices;
  for (const GpuDeviceFigures& d : r.gpu_devices) {
    const GpuProcessDevice* mine = nullptr;
    if (p != nullptr) {
      for (const GpuProcessDevice& used : p->devices) {
        if (used.index == d.index) mine = &used;
      }
    }
    devices.push_back(absl::StrFormat(
        "{\"index\":%d,\"name\":%s,\"utilization\":%.4f,\"memory_used_peak_bytes\":%d,"
        "\"memory_total_bytes\":%d,\"process_utilization\":%s,\"process_memory_peak_bytes\":%s}",
        d.index, JsonString(d.name), d.utilization, d.memory_used_peak_bytes, d.memory_total_bytes,
        mine ? absl::StrFormat("%.4f", mine->utilization) : "null",
        mine ? absl::StrCat(mine->memory_peak_bytes) : "null"));
  }
  fields.push_back(absl::StrCat("\"gpu_devices\":[", absl::StrJoin(devices, ","), "]"));
}

void AppendMemoryJson(const StatReport& r, std::vector<std::string>& fields) {
  const ResidentMemory& m = r.memory;
  auto known = [&m](uint64_t value) { return m.known() ? absl::StrCat(value) : "null"; };
  fields.push_back(absl::StrCat("\"rss_bytes\":", known(m.resident_bytes())));
  fields.push_back(absl::StrCat("\"rss_anon_bytes\":", known(m.anon_bytes)));
  fields.push_back(absl::StrCat("\"rss_file_bytes\":", known(m.file_bytes)));
  fields.push_back(absl::StrCat("\"rss_shmem_bytes\":", known(m.shmem_bytes)));
  fields.push_back(absl::StrCat("\"swap_bytes\":", known(m.swap_bytes)));
  fields.push_back(absl::StrCat("\"peak_rss_bytes\":", known(m.peak_bytes)));
  fields.push_back(absl::StrCat("\"peak_rss_seconds\":",
                                m.known() ? absl::StrFormat("%.3f", r.peak_seconds) : "null"));
  std::vector<std::string> points;
  for (const MemoryPoint& p : r.memory_timeline) {
    points.push_back(
        absl::StrFormat("{\"seconds\":%.3f,\"rss_bytes\":%d,\"anon_bytes\":%d,\"swap_bytes\":%d}",
                        p.seconds, p.resident_bytes, p.anon_bytes, p.swap_bytes));
  }
  fields.push_back(absl::StrCat("\"memory_timeline\":[", absl::StrJoin(points, ","), "]"));
  fields.push_back(absl::StrCat("\"oom_killed\":", r.oom_killed ? "true" : "false"));
  fields.push_back(
      absl::StrCat("\"memory_growth_sampled\":", r.memory_growth_sampled ? "true" : "false"));
  fields.push_back(
      absl::StrCat("\"memory_growth_to_peak\":", r.memory_growth_to_peak ? "true" : "false"));
  fields.push_back(absl::StrCat("\"memory_growth_bytes\":", r.memory_growth_bytes));
  std::vector<std::string> stacks;
  for (const MemoryGrowthStack& stack : r.memory_growth_stacks) {
    std::vector<std::string> frames;
    for (const std::string& frame : stack.frames) frames.push_back(JsonString(frame));
    stacks.push_back(absl::StrFormat("{\"stack\":[%s],\"bytes\":%d,\"share\":%.4f}",
                                     absl::StrJoin(frames, ","), stack.bytes, stack.share));
  }
  fields.push_back(absl::StrCat("\"memory_growth_stacks\":[", absl::StrJoin(stacks, ","), "]"));
}

// The memory lines of the text report: figures, a few points of the
// timeline, the growth stacks.
void AppendMemoryText(const StatReport& r, std::string& out) {
  const ResidentMemory& m = r.memory;
  if (!m.known()) {
    absl::StrAppend(&out, "\nmemory: not read (no thread of the process ran while counted)\n");
    return;
  }
  absl::StrAppend(
      &out, absl::StrFormat("\nmemory: resident %s (anon %s, file %s, shmem %s), swap %s\n",
                            Bytes(m.resident_bytes()), Bytes(m.anon_bytes), Bytes(m.file_bytes),
                            Bytes(m.shmem_bytes), Bytes(m.swap_bytes)));
  std::string when = r.peak_seconds < 0 ? std::string("before the window")
                                        : absl::StrFormat("first seen at %.2f s", r.peak_seconds);
  absl::StrAppend(&out, absl::StrFormat("  peak resident %s, %s\n", Bytes(m.peak_bytes), when));
  if (r.oom_killed) {
    absl::StrAppend(&out, "  KILLED by the kernel's OOM killer\n");
  }
  // At most 12 points of the timeline, evenly spread, the last one always.
  const std::vector<MemoryPoint>& points = r.memory_timeline;
  if (points.size() > 1) {
    absl::StrAppend(&out, "  timeline (resident):");
    size_t shown = std::min<size_t>(points.size(), 12);
    for (size_t i = 0; i < shown; ++i) {
      const MemoryPoint& p = points[i * (points.size() - 1) / (shown - 1)];
      absl::StrAppend(&out, absl::StrFormat("%s%.1fs %s", i == 0 ? " " : ", ", p.seconds,
                                            Bytes(p.resident_bytes)));
    }
    absl::StrAppend(&out, "\n");
  }
  if (!r.memory_growth_stacks.empty()) {
    absl::StrAppend(&out,
                    absl::StrFormat("memory growth %s (%s sampled):\n",
                                    r.memory_growth_to_peak ? "up to the peak" : "over the window",
                                    Bytes(r.memory_growth_bytes)));
    for (const MemoryGrowthStack& stack : r.memory_growth_stacks) {
      absl::StrAppend(&out, absl::StrFormat("  %5.1f%% %10s  %s\n", 100 * stack.share,
                                            Bytes(stack.bytes), absl::StrJoin(stack.frames, ";")));
    }
  }
}

// "allocations", only with --allocations (as "syscalls").
void AppendAllocationsJson(const StatReport& r, std::vector<std::string>& fields) {
  if (!r.allocations) return;
  const AllocationFigures& a = *r.allocations;
  std::vector<std::string> sites;
  for (const AllocationSite& site : a.sites) {
    sites.push_back(absl::StrFormat(
        "{\"frame\":%s,\"allocated_bytes\":%d,\"allocated_share\":%.4f,\"in_use_bytes\":%d,"
        "\"in_use_share\":%.4f}",
        JsonString(site.frame), site.allocated_bytes, site.allocated_share, site.in_use_bytes,
        site.in_use_share));
  }
  fields.push_back(absl::StrFormat(
      "\"allocations\":{\"sampler\":%s,\"sample_bytes\":%d,\"samples\":%d,\"frees\":%d,"
      "\"untracked\":%d,\"records_lost\":%d,\"allocated_bytes\":%d,\"in_use_bytes\":%d,"
      "\"in_use_moment\":%s,\"sites\":[%s]}",
      a.in_process ? "\"in-process\"" : "\"uprobes\"", a.sample_bytes, a.samples, a.frees,
      a.untracked, a.records_lost, a.allocated_bytes, a.in_use_bytes, JsonString(a.in_use_moment),
      absl::StrJoin(sites, ",")));
}

// The allocation lines of the text report: the estimates, then the sites.
void AppendAllocationsText(const StatReport& r, std::string& out) {
  if (!r.allocations) return;
  const AllocationFigures& a = *r.allocations;
  absl::StrAppend(&out, absl::StrFormat("\nallocations: sampled every %s on average, %s\n",
                                        Bytes(a.sample_bytes),
                                        a.in_process ? "in the process (libpystrobe-alloc.so)"
                                                     : "through uprobes on the allocator"));
  absl::StrAppend(&out, absl::StrFormat("  %-22s %10s  (%d samples, %d freed", "allocated",
                                        Bytes(a.allocated_bytes), a.samples, a.frees));
  if (a.untracked > 0) absl::StrAppend(&out, absl::StrFormat(", %d untracked", a.untracked));
  if (a.records_lost > 0) {
    absl::StrAppend(&out, absl::StrFormat(", %d records lost", a.records_lost));
  }
  absl::StrAppend(&out, ")\n");
  absl::StrAppend(&out, absl::StrFormat("  %-22s %10s  (held %s)\n", "still in use",
                                        Bytes(a.in_use_bytes), a.in_use_moment));
  if (a.sites.empty()) return;
  absl::StrAppend(&out, "  where (allocated, and still in use):\n");
  for (const AllocationSite& site : a.sites) {
    absl::StrAppend(
        &out, absl::StrFormat("  %5.1f%% %10s  %5.1f%% %10s  %s\n", 100 * site.allocated_share,
                              Bytes(site.allocated_bytes), 100 * site.in_use_share,
                              Bytes(site.in_use_bytes), site.frame));
  }
}

}  // namespace

std::string StatReportJson(const StatReport& r) {
  const TaskFigures& f = r.figures;
  std::vector<std::string> fields = {
      absl::StrCat("\"pid\":", r.pid),
      absl::StrCat("\"comm\":", JsonString(r.comm)),
      absl::StrCat("\"duration_seconds\":", Seconds(r.duration_seconds)),
      absl::StrCat("\"cpu_user_seconds\":", Seconds(f.cpu_user_seconds)),
      absl::StrCat("\"cpu_system_seconds\":", Seconds(f.cpu_system_seconds)),
      absl::StrCat("\"runqueue_seconds\":", Seconds(f.runqueue_seconds)),
      absl::StrCat("\"preempted_seconds\":", Seconds(f.preempted_seconds)),
      absl::StrCat("\"offcpu_io_seconds\":", Seconds(f.offcpu_io_seconds)),
      absl::StrCat("\"offcpu_sleep_seconds\":", Seconds(f.offcpu_sleep_seconds)),
      absl::StrCat("\"gil_wait_seconds\":", Seconds(f.gil_wait_seconds)),
      absl::StrCat("\"gil_wait_measured\":", r.gil_wait_measured ? "true" : "false"),
      absl::StrCat("\"free_threaded\":", r.free_threaded ? "true" : "false"),
      absl::StrCat("\"gil_held_sample_share\":",
                   r.gil_held_share < 0 ? "null" : absl::StrFormat("%.4f", r.gil_held_share)),
      absl::StrCat("\"read_bytes\":", f.read_bytes),
      absl::StrCat("\"write_bytes\":", f.write_bytes),
      absl::StrCat("\"read_calls\":", f.read_calls),
      absl::StrCat("\"write_calls\":", f.write_calls),
      absl::StrCat("\"read_blocked_seconds\":", Seconds(f.read_blocked_seconds)),
      absl::StrCat("\"write_blocked_seconds\":", Seconds(f.write_blocked_seconds)),
      absl::StrCat("\"block_io_bytes\":", f.block_io_bytes),
      absl::StrCat("\"block_io_ops\":", f.block_io_ops),
      absl::StrCat("\"minor_faults\":", f.minor_faults),
      absl::StrCat("\"major_faults\":", f.major_faults),
      absl::StrCat("\"context_switches\":", f.context_switches()),
      absl::StrCat("\"voluntary_switches\":", f.voluntary_switches),
      absl::StrCat("\"involuntary_switches\":", f.involuntary_switches),
      absl::StrCat("\"gc_seconds\":", Seconds(f.gc_seconds)),
      absl::StrCat("\"gc_collections\":", f.gc_collections),
      absl::StrCat("\"gc_measured\":", r.gc_measured ? "true" : "false"),
      absl::StrCat("\"threads\":", r.threads),
      absl::StrCat("\"exited\":", r.exited ? "true" : "false"),
      absl::StrCat("\"samples\":", r.samples),
      absl::StrCat("\"gpu_wait_seconds\":",
                   Seconds(r.gpu_wait_oncpu_seconds + r.gpu_wait_offcpu_seconds)),
      absl::StrCat("\"gpu_wait_oncpu_seconds\":", Seconds(r.gpu_wait_oncpu_seconds)),
      absl::StrCat("\"gpu_wait_offcpu_seconds\":", Seconds(r.gpu_wait_offcpu_seconds)),
      absl::StrCat("\"cpu_work_seconds\":",
                   Seconds(std::max(0.0, f.cpu_seconds() - r.gpu_wait_oncpu_seconds))),
      absl::StrCat("\"verdict\":", JsonString(r.verdict.name)),
      absl::StrCat("\"evidence\":", JsonString(r.verdict.evidence)),
      absl::StrCat("\"stacks_kind\":", JsonString(r.stacks_kind)),
      absl::StrCat("\"stacks_note\":", JsonString(r.stacks_note)),
  };
  if (r.syscalls) {
    fields.push_back(
        absl::StrFormat("\"syscalls\":{\"read_calls\":%d,\"read_bytes\":%d,\"read_seconds\":%s,"
                        "\"write_calls\":%d,\"write_bytes\":%d,\"write_seconds\":%s}",
                        f.sys_read_calls, f.sys_read_bytes, Seconds(f.sys_read_seconds),
                        f.sys_write_calls, f.sys_write_bytes, Seconds(f.sys_write_seconds)));
  }
  if (r.gpu_measured) AppendGpuJson(r, fields);
  AppendMemoryJson(r, fields);
  AppendAllocationsJson(r, fields);
  std::vector<std::string> stacks;
  for (const ReportStack& stack : r.stacks) {
    std::vector<std::string> frames;
    for (const std::string& frame : stack.frames) {
      frames.push_back(JsonString(frame));
    }
    stacks.push_back(absl::StrFormat(
        "{\"samples\":%d,\"seconds\":%s,\"share\":%.4f,\"frames\":[%s]}", stack.samples,
        Seconds(stack.seconds), stack.share, absl::StrJoin(frames, ",")));
  }
  fields.push_back(absl::StrCat("\"stacks\":[", absl::StrJoin(stacks, ","), "]"));
  fields.push_back(
      absl::StrFormat("\"accounting_drops\":{\"process_map_full\":%d,\"thread_map_full\":%d,"
                      "\"no_thread_state\":%d}",
                      r.drops.process_map_full, r.drops.thread_map_full, r.drops.no_thread_state));
  return absl::StrCat("{", absl::StrJoin(fields, ","), "}\n");
}

std::string StatReportText(const StatReport& r) {
  const TaskFigures& f = r.figures;
  double d = r.duration_seconds > 0 ? r.duration_seconds : 1;
  std::string out = absl::StrFormat("pystrobe stat: %s (%d)%s, %.2f s, %d thread%s\n\n", r.comm,
                                    r.pid, r.exited ? ", exited" : "", r.duration_seconds,
                                    r.threads, r.threads == 1 ? "" : "s");
  auto line = [&out](absl::string_view name, const std::string& value) {
    absl::StrAppend(&out, absl::StrFormat("  %-22s %s\n", name, value));
  };
  line("CPU user", absl::StrFormat("%10.3f s  (%5.1f%% of a CPU)", f.cpu_user_seconds,
                                   100 * f.cpu_user_seconds / d));
  line("CPU system", absl::StrFormat("%10.3f s  (%5.1f%% of a CPU)", f.cpu_system_seconds,
                                     100 * f.cpu_system_seconds / d));
  line("run queue",
       absl::StrFormat("%10.3f s  (preempted %.3f s)", f.runqueue_seconds, f.preempted_seconds));
  line("off-CPU: IO wait", absl::StrFormat("%10.3f s", f.offcpu_io_seconds));
  line("off-CPU: sleep/lock", absl::StrFormat("%10.3f s", f.offcpu_sleep_seconds));
  std::string held = r.gil_held_share < 0 ? std::string()
                                          : absl::StrFormat(", %.0f%% of Python samples held it",
                                                            100 * r.gil_held_share);
  line("  of which GIL wait",
       r.free_threaded       ? std::string("         - (free-threaded CPython: no GIL)")
       : r.gil_wait_measured ? absl::StrFormat("%10.3f s%s", f.gil_wait_seconds, held)
                             : std::string("         - (not a CPython process pystrobe knows)"));
  line("reads", absl::StrFormat("%10d calls, %s, %.3f s blocked in them", f.read_calls,
                                Bytes(f.read_bytes), f.read_blocked_seconds));
  line("writes", absl::StrFormat("%10d calls, %s, %.3f s blocked in them", f.write_calls,
                                 Bytes(f.write_bytes), f.write_blocked_seconds));
  if (r.syscalls) {
    line("read syscalls", absl::StrFormat("%10d calls, %s, %.3f s in them", f.sys_read_calls,
                                          Bytes(f.sys_read_bytes), f.sys_read_seconds));
    line("write syscalls", absl::StrFormat("%10d calls, %s, %.3f s in them", f.sys_write_calls,
                                           Bytes(f.sys_write_bytes), f.sys_write_seconds));
  }
  line("block IO issued",
       absl::StrFormat("%10s in %d bios", Bytes(f.block_io_bytes), f.block_io_ops));
  line("page faults", absl::StrFormat("%10d minor, %d major", f.minor_faults, f.major_faults));
  line("context switches",
       absl::StrFormat("%10d (%d voluntary, %d involuntary)", f.context_switches(),
                       f.voluntary_switches, f.involuntary_switches));
  line("GC", r.gc_measured
                 ? absl::StrFormat("%10.3f s, %d collections", f.gc_seconds, f.gc_collections)
                 : std::string("         - (no GC probes in this interpreter)"));
  double gpu_wait = r.gpu_wait_oncpu_seconds + r.gpu_wait_offcpu_seconds;
  if (gpu_wait > 0) {
    line("GPU wait", absl::StrFormat("%10.3f s  (%.3f s spinning on CPU, %.3f s asleep); CPU "
                                     "work outside it %.3f s",
                                     gpu_wait, r.gpu_wait_oncpu_seconds, r.gpu_wait_offcpu_seconds,
                                     std::max(0.0, f.cpu_seconds() - r.gpu_wait_oncpu_seconds)));
  }
  if (r.gpu_measured) {
    if (r.gpu) {
      line("GPU (this process)",
           absl::StrFormat("%9.1f%% utilization%s, memory %s (peak %s)", 100 * r.gpu->utilization,
                           r.gpu->utilization_from_device ? " (its devices')" : "",
                           Bytes(r.gpu->memory_bytes), Bytes(r.gpu->memory_peak_bytes)));
    } else {
      line("GPU (this process)", "         - (NVML did not list it on any GPU)");
    }
    for (const GpuDeviceFigures& d : r.gpu_devices) {
      line(absl::StrFormat("  GPU %d", d.index),
           absl::StrFormat("%9.1f%% utilization, memory peak %s of %s  %s", 100 * d.utilization,
                           Bytes(d.memory_used_peak_bytes), Bytes(d.memory_total_bytes), d.name));
    }
  }
  AppendMemoryText(r, out);
  AppendAllocationsText(r, out);
  absl::StrAppend(&out, "\nverdict: ", r.verdict.name, "\n  ", r.verdict.evidence, "\n\n");
  if (r.stacks.empty()) {
    absl::StrAppend(&out, "stacks: ", r.stacks_note.empty() ? "none sampled" : r.stacks_note, "\n");
  } else {
    absl::StrAppend(&out, "top stacks (", r.stacks_kind, "):\n");
    for (const ReportStack& stack : r.stacks) {
      std::string weight = stack.samples > 0 ? absl::StrFormat("%6d smp", stack.samples)
                                             : absl::StrFormat("%8.3f s", stack.seconds);
      absl::StrAppend(&out, absl::StrFormat("  %5.1f%% %s  %s\n", 100 * stack.share, weight,
                                            absl::StrJoin(stack.frames, ";")));
    }
    if (!r.stacks_note.empty()) absl::StrAppend(&out, "  (", r.stacks_note, ")\n");
  }
  if (r.drops.process_map_full + r.drops.thread_map_full + r.drops.no_thread_state > 0) {
    absl::StrAppend(&out, absl::StrFormat("\naccounting lost: %d process, %d thread entries\n",
                                          r.drops.process_map_full, r.drops.thread_map_full));
  }
  return out;
}

}  // namespace pystrobe

#include "daemon/cli/record_summary.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "daemon/loader/drop_reasons.h"
#include "exporters/json_string.h"

namespace pystrobe {
namespace {

// "<count> <words>" for a kernel drop reason.
std::string Dropped(const SamplerCounters& kernel, pystrobe_drop_reason reason) {
  std::string_view words = DropReasonInfo(reason).summary_words;
  return absl::StrCat(kernel.dropped[reason], " ", absl::string_view(words.data(), words.size()));
}

}  // namespace

std::string RecordSummary(const SamplerCounters& kernel, const RecordTotals& totals,
                          absl::Duration elapsed, int rate_hz, const NativeUnwindTotals& native) {
  std::string text =
      absl::StrFormat("pystrobe: %d samples of %d processes in %.1f s at %d Hz\n", totals.samples,
                      totals.processes, absl::ToDoubleSeconds(elapsed), rate_hz);
  absl::StrAppend(&text, "pystrobe: lost ", Dropped(kernel, PYSTROBE_DROP_RINGBUF_FULL), ", ",
                  totals.malformed_records, " malformed records, ",
                  Dropped(kernel, PYSTROBE_DROP_PROCESS_EVENT),
                  "; stack reads failed: ", Dropped(kernel, PYSTROBE_DROP_KERNEL_STACK), ", ",
                  Dropped(kernel, PYSTROBE_DROP_USER_STACK), "\n");
  if (totals.python_processes > 0) {
    absl::StrAppend(
        &text, "pystrobe: Python: ", totals.python_processes, " processes, ", kernel.python_walked,
        " samples walked, ", kernel.python_truncated, " truncated, ",
        Dropped(kernel, PYSTROBE_DROP_PYTHON_READ), ", ",
        Dropped(kernel, PYSTROBE_DROP_PYTHON_NO_THREAD_STATE), ", ", totals.python_codes_unreadable,
        " code objects unreadable, ", totals.python_codes_from_copies,
        " named from the kernel's copies (", kernel.python_codes_sent, " sent, ",
        absl::StrFormat("%.1f KiB, %.2f ms", totals.python_code_copy_bytes / 1024.0,
                        kernel.python_code_copy_ns / 1e6),
        " in the kernel; ", kernel.python_codes_deferred, " put off to a later sample), ",
        kernel.python_at_exec, " processes known from their exec, ",
        Dropped(kernel, PYSTROBE_DROP_PYTHON_CODE), "\n");
  }
  if (totals.python_not_read > 0) {
    absl::StrAppend(&text, "pystrobe: warning: CPython not read in ", totals.python_not_read,
                    " processes (their samples have native frames only)");
    for (const ProcessTable::PythonNotRead& process : totals.python_not_read_examples) {
      absl::StrAppend(&text, "; ", process.pid, " (", process.comm, "): ", process.why.message());
    }
    if (totals.python_not_read > totals.python_not_read_examples.size()) {
      absl::StrAppend(&text, "; ...");
    }
    absl::StrAppend(&text, "\n");
  }
  if (kernel.offcpu_sent > 0 || kernel.dropped[PYSTROBE_DROP_OFFCPU_STORAGE] > 0) {
    absl::StrAppend(&text, "pystrobe: off CPU: ", kernel.offcpu_sent, " intervals, ",
                    Dropped(kernel, PYSTROBE_DROP_OFFCPU_STORAGE), "\n");
  }
  if (native.enabled || kernel.dropped[PYSTROBE_DROP_NATIVE_UNWIND] > 0 ||
      kernel.dropped[PYSTROBE_DROP_NATIVE_STALE_MAPPINGS] > 0 ||
      kernel.dropped[PYSTROBE_DROP_NATIVE_NOT_TRACKED] > 0) {
    absl::StrAppend(&text, "pystrobe: native: ", kernel.native_complete, " walks whole, ",
                    kernel.native_jit, " ended in JIT code, ", kernel.native_truncated,
                    " truncated, ", Dropped(kernel, PYSTROBE_DROP_NATIVE_UNWIND), " (of them ",
                    Dropped(kernel, PYSTROBE_DROP_NATIVE_STALE_MAPPINGS), ", ",
                    Dropped(kernel, PYSTROBE_DROP_NATIVE_TABLE_ABSENT), ", ",
                    Dropped(kernel, PYSTROBE_DROP_NATIVE_NOT_TRACKED), ")\n");
  }
  if (native.enabled) {
    absl::StrAppend(
        &text, "pystrobe: unwind tables: ", native.tables_loaded, " loaded for ", native.binaries,
        " binaries mapped (", native.tables_built,
        absl::StrFormat(" built in %.1f ms of CPU, ", absl::ToDoubleMilliseconds(native.build_cpu)),
        native.tables_from_disk,
        absl::StrFormat(" read from disk in %.1f ms%s), ",
                        absl::ToDoubleMilliseconds(native.disk_load_cpu),
                        native.disk_cache ? "" : ", no disk cache"),
        native.tables_evicted, " evicted for room, ", native.tables_unavailable, " unavailable, ",
        absl::StrFormat("%.1f of %.1f MiB of kernel memory at most; ",
                        native.kernel_bytes / 1048576.0, native.budget_bytes / 1048576.0),
        native.files_without_cfi, " files without call frame information\n");
  }
  if (kernel.memory_sent + kernel.memory_lost > 0) {
    absl::StrAppend(&text, "pystrobe: memory: ", kernel.memory_sent,
                    absl::StrFormat(" samples of resident growth (%.1f MiB), ",
                                    totals.memory_bytes / 1048576.0),
                    kernel.memory_retaken, " taken twice, ", kernel.memory_lost,
                    " lost to a tick that overwrote them twice\n");
  }
  if (kernel.allocations_sent > 0) {
    const Recorder::InUseTotals& in_use = totals.in_use;
    std::string held;
    auto add = [&held](uint64_t bytes, uint32_t processes, absl::string_view moment) {
      if (processes == 0) return;
      absl::StrAppend(&held, held.empty() ? "" : ", ",
                      absl::StrFormat("%.1f MiB %s (%u %s)", bytes / 1048576.0, moment, processes,
                                      processes == 1 ? "process" : "processes"));
    };
    add(in_use.at_finalization_bytes, in_use.finalized_processes,
        "held when Python finalization began");
    add(in_use.at_exit_bytes, in_use.exited_processes, "held at exit");
    add(in_use.at_end_bytes, in_use.running_processes, "held when the recording ended");
    absl::StrAppend(
        &text, "pystrobe: allocations: ", kernel.allocations_sent,
        absl::StrFormat(" sampled (%.1f MiB allocated), %d freed, %d untracked; %s",
                        totals.allocation_bytes / 1048576.0, kernel.frees_sent,
                        kernel.allocations_untracked, held.empty() ? "none held" : held),
        "\n");
  }
  if (kernel.period_redraws_failed > 0) {
    absl::StrAppend(&text, "pystrobe: the kernel refused ", kernel.period_redraws_failed, " of ",
                    kernel.period_redraws + kernel.period_redraws_failed,
                    " redraws of a CPU's sampling period; those CPUs kept their previous period "
                    "a while\n");
  }
  if (totals.samples_without_gil > 0) {
    absl::StrAppend(&text, "pystrobe: --gil left out ", totals.samples_without_gil,
                    " samples of threads not holding the GIL\n");
  }
  if (totals.samples_free_threaded > 0) {
    absl::StrAppend(&text, "pystrobe: --gil kept all ", totals.samples_free_threaded,
                    " samples of free-threaded CPython: it has no GIL, every thread runs "
                    "as a holder would\n");
  }
  return text;
}

std::string RecordSummaryJson(const SamplerCounters& kernel, const RecordTotals& totals,
                              absl::Duration elapsed, int rate_hz,
                              const NativeUnwindTotals& native) {
  std::string dropped;
  for (const DropReason& row : kDropReasons) {
    absl::StrAppend(&dropped, dropped.empty() ? "" : ",", JsonString(std::string(row.metric_label)),
                    ":", kernel.dropped[row.reason]);
  }
  return absl::StrCat(
      "{\"samples\":", totals.samples, ",\"processes\":", totals.processes,
      absl::StrFormat(",\"seconds\":%.3f", absl::ToDoubleSeconds(elapsed)),
      ",\"rate_hz\":", rate_hz, ",\"malformed_records\":", totals.malformed_records,
      ",\"dropped\":{", dropped, "}", ",\"python\":{\"processes\":", totals.python_processes,
      ",\"not_read\":", totals.python_not_read, ",\"samples_walked\":", kernel.python_walked,
      ",\"truncated\":", kernel.python_truncated,
      ",\"codes_unreadable\":", totals.python_codes_unreadable,
      ",\"codes_from_copies\":", totals.python_codes_from_copies,
      ",\"codes_sent\":", kernel.python_codes_sent,
      ",\"codes_deferred\":", kernel.python_codes_deferred,
      ",\"code_copy_bytes\":", totals.python_code_copy_bytes,
      ",\"known_from_exec\":", kernel.python_at_exec, "}",
      ",\"offcpu_intervals\":", kernel.offcpu_sent, ",\"memory_samples\":", kernel.memory_sent,
      ",\"memory_bytes\":", totals.memory_bytes, ",\"memory_samples_lost\":", kernel.memory_lost,
      ",\"allocations\":{\"sampled\":", kernel.allocations_sent, ",\"freed\":", kernel.frees_sent,
      ",\"untracked\":", kernel.allocations_untracked, ",\"bytes\":", totals.allocation_bytes,
      ",\"held_at_finalization_bytes\":", totals.in_use.at_finalization_bytes,
      ",\"held_at_exit_bytes\":", totals.in_use.at_exit_bytes,
      ",\"held_at_end_bytes\":", totals.in_use.at_end_bytes,
      ",\"finalized_processes\":", totals.in_use.finalized_processes, "}",
      ",\"period_redraws\":", kernel.period_redraws,
      ",\"period_redraws_failed\":", kernel.period_redraws_failed,
      ",\"samples_without_gil\":", totals.samples_without_gil,
      ",\"samples_free_threaded\":", totals.samples_free_threaded,
      ",\"native_unwind\":{\"enabled\":", native.enabled ? "true" : "false",
      ",\"complete\":", kernel.native_complete, ",\"jit\":", kernel.native_jit,
      ",\"truncated\":", kernel.native_truncated, ",\"through_jit\":", kernel.native_through_jit,
      ",\"tables\":", native.tables_loaded, ",\"binaries\":", native.binaries,
      ",\"tables_shared\":", native.tables_shared, ",\"tables_built\":", native.tables_built,
      ",\"tables_from_disk\":", native.tables_from_disk,
      ",\"tables_evicted\":", native.tables_evicted,
      ",\"tables_unavailable\":", native.tables_unavailable,
      ",\"files_without_tables\":", native.files_without_cfi,
      ",\"kernel_bytes\":", native.kernel_bytes, ",\"budget_bytes\":", native.budget_bytes,
      absl::StrFormat(",\"build_ms\":%.3f", absl::ToDoubleMilliseconds(native.build_cpu)),
      absl::StrFormat(",\"disk_load_ms\":%.3f", absl::ToDoubleMilliseconds(native.disk_load_cpu)),
      "}}\n");
}

}  // namespace pystrobe

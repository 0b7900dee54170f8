// Counts the sampler's records per process and thread, with how many were
// taken while the thread held the GIL: the sampler's side of a verdict.
#ifndef PYSTROBE_DAEMON_ACCOUNTING_SAMPLE_TALLY_H_
#define PYSTROBE_DAEMON_ACCOUNTING_SAMPLE_TALLY_H_

#include <cstdint>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/records/record_decoder.h"

namespace pystrobe {

struct ProcessSamples {
  uint64_t samples = 0;                // on-CPU samples of the process
  uint64_t python_samples = 0;         // of those, with a CPython walk
  uint64_t gil_samples = 0;            // of those, the thread held the GIL
  uint64_t free_threaded_samples = 0;  // of python_samples, of a CPython without a GIL
  absl::flat_hash_map<uint32_t, uint64_t> per_thread;  // tid -> samples
};

class SampleTally : public RecordObserver {
 public:
  // Looks at one decoded record; anything but an on-CPU sample is ignored.
  void Observe(const RingRecord& record) override {
    const auto* sample = std::get_if<SampleRecord>(&record);
    if (sample == nullptr || sample->kind != PYSTROBE_EVENT_SAMPLE) return;
    ProcessSamples& p = processes_[sample->pid];
    ++p.samples;
    ++p.per_thread[sample->tid];
    if (sample->python_status == PYSTROBE_PY_WALKED) ++p.python_samples;
    if (sample->flags & PYSTROBE_SAMPLE_HOLDS_GIL) ++p.gil_samples;
    if (sample->flags & PYSTROBE_SAMPLE_FREE_THREADED) ++p.free_threaded_samples;
  }

  const ProcessSamples* Of(uint32_t pid) const {
    auto it = processes_.find(pid);
    return it == processes_.end() ? nullptr : &it->second;
  }
  void Clear() { processes_.clear(); }

 private:
  absl::flat_hash_map<uint32_t, ProcessSamples> processes_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_ACCOUNTING_SAMPLE_TALLY_H_

// Counts the sampler's records per process and thread, with how many were
// taken while the thread held the GIL: the sampler's side of a verdict.
#ifndef PYSTROBE_DAEMON_ACCOUNTING_SAMPLE_TALLY_H_
#define PYSTROBE_DAEMON_ACCOUNTING_SAMPLE_TALLY_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "absl/container/flat_hash_map.h"
#include "bpf/pystrobe_abi.h"

namespace pystrobe {

struct ProcessSamples {
  uint64_t samples = 0;                // on-CPU samples of the process
  uint64_t python_samples = 0;         // of those, with a CPython walk
  uint64_t gil_samples = 0;            // of those, the thread held the GIL
  uint64_t free_threaded_samples = 0;  // of python_samples, of a CPython without a GIL
  absl::flat_hash_map<uint32_t, uint64_t> per_thread;  // tid -> samples
};

class SampleTally {
 public:
  // Looks at one ring buffer record; anything but an on-CPU sample is ignored.
  void Observe(std::span<const uint8_t> record) {
    pystrobe_sample header;
    constexpr size_t kHeader = offsetof(pystrobe_sample, data);
    if (record.size() < kHeader) return;
    std::memcpy(&header, record.data(), kHeader);
    if (header.kind != PYSTROBE_EVENT_SAMPLE) return;
    ProcessSamples& p = processes_[header.pid];
    ++p.samples;
    ++p.per_thread[header.tid];
    if (header.python_status == PYSTROBE_PY_WALKED) ++p.python_samples;
    if (header.flags & PYSTROBE_SAMPLE_HOLDS_GIL) ++p.gil_samples;
    if (header.flags & PYSTROBE_SAMPLE_FREE_THREADED) ++p.free_threaded_samples;
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

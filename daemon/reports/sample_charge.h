// Where a sample's time went, as a Python user asks it: which Python line
// it belongs to (the innermost Python frame on its stack), and whether that
// line was running its own bytecode, native code it called, the kernel on
// its behalf, or waiting (and why).
#ifndef PYSTROBE_DAEMON_REPORTS_SAMPLE_CHARGE_H_
#define PYSTROBE_DAEMON_REPORTS_SAMPLE_CHARGE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "daemon/reports/recording_reader.h"

namespace pystrobe {

// The columns a row's samples are split into. The order is the order the
// text table and the HTML page show them in.
enum class CostColumn : int {
  kPython,     // the interpreter running the line's bytecode (and its own C code)
  kNative,     // C extensions, BLAS, libc... called from the line
  kSystem,     // the kernel, on CPU, on behalf of the line
  kIoWait,     // off CPU: waiting for IO (the "[io wait]" leaf)
  kSleep,      // off CPU: sleeping or waiting on a lock ("[sleep]")
  kRunqueue,   // off CPU: runnable, waiting for a CPU ("[runqueue]")
  kGilWait,    // off CPU: waiting for the GIL ("[gil wait]")
  kOtherWait,  // off CPU otherwise: "[await]", "[gpu wait]", "[off cpu]"
  kMemory,     // bytes: resident growth or sampled allocations
};
inline constexpr size_t kCostColumns = 9;
using ColumnValues = std::array<int64_t, kCostColumns>;

// The JSON key: "python", "native", "system", "io_wait", "sleep",
// "runqueue", "gil_wait", "other_wait", "memory".
const char* CostColumnKey(CostColumn column);
// The text table's header: "python", "native", "system", "io wait",
// "sleep/lock", "runqueue", "gil wait", "other wait", "memory".
const char* CostColumnTitle(CostColumn column);

// The columns with samples in `totals`, in CostColumn's order: the ones a
// table shows.
std::vector<CostColumn> ColumnsWithSamples(const ColumnValues& totals);

// Whether a sample type counts bytes (every sample is then memory).
bool IsMemorySampleType(const RecordedSampleType& type);

// The row a sample is charged to and the column it falls in.
struct SampleCharge {
  // The index in the stack's frames of the frame the sample is charged to:
  // the innermost Python frame, or the leaf when the stack has none (a
  // process that is not Python).
  size_t position = 0;
  CostColumn column = CostColumn::kPython;
};

// nullopt for a stack without frames. `memory`: the sample type counts bytes.
std::optional<SampleCharge> ChargeSample(const Recording& recording, const RecordedStack& stack,
                                         bool memory);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_REPORTS_SAMPLE_CHARGE_H_

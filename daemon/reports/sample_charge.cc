#include "daemon/reports/sample_charge.h"

#include <string_view>

namespace pystrobe {
namespace {

constexpr std::string_view kOffCpuRoot = "[off-cpu]";

// The off-CPU reason a marker frame names (daemon/recording/profile_builder.cc
// writes them as a stack's leaf), or nullopt for other markers.
std::optional<CostColumn> OffCpuColumn(std::string_view marker) {
  if (marker == "[io wait]") return CostColumn::kIoWait;
  if (marker == "[sleep]") return CostColumn::kSleep;
  if (marker == "[runqueue]") return CostColumn::kRunqueue;
  if (marker == "[gil wait]") return CostColumn::kGilWait;
  if (marker == "[await]" || marker == "[gpu wait]" || marker == "[off cpu]") {
    return CostColumn::kOtherWait;
  }
  return std::nullopt;
}

// Markers that stand for native code: not walked ("[native]", without
// --native), not symbolized ("[unknown]"), or JIT-compiled ("[jit]").
bool IsUnwalkedNativeCode(std::string_view marker) {
  return marker == "[native]" || marker == "[unknown]" || marker == "[jit]";
}

}  // namespace

const char* CostColumnKey(CostColumn column) {
  switch (column) {
    case CostColumn::kPython:
      return "python";
    case CostColumn::kNative:
      return "native";
    case CostColumn::kSystem:
      return "system";
    case CostColumn::kIoWait:
      return "io_wait";
    case CostColumn::kSleep:
      return "sleep";
    case CostColumn::kRunqueue:
      return "runqueue";
    case CostColumn::kGilWait:
      return "gil_wait";
    case CostColumn::kOtherWait:
      return "other_wait";
    case CostColumn::kMemory:
      return "memory";
  }
  return "?";
}

const char* CostColumnTitle(CostColumn column) {
  switch (column) {
    case CostColumn::kIoWait:
      return "io wait";
    case CostColumn::kSleep:
      return "sleep/lock";
    case CostColumn::kGilWait:
      return "gil wait";
    case CostColumn::kOtherWait:
      return "other wait";
    default:
      return CostColumnKey(column);
  }
}

std::vector<CostColumn> ColumnsWithSamples(const ColumnValues& totals) {
  std::vector<CostColumn> shown;
  for (size_t c = 0; c < kCostColumns; ++c) {
    if (totals[c] != 0) shown.push_back(static_cast<CostColumn>(c));
  }
  return shown;
}

bool IsMemorySampleType(const RecordedSampleType& type) { return type.unit == "bytes"; }

std::optional<SampleCharge> ChargeSample(const Recording& recording, const RecordedStack& stack,
                                         bool memory) {
  const std::vector<size_t>& frames = stack.frames;
  if (frames.empty()) return std::nullopt;
  auto frame = [&](size_t at) -> const RecordedFrame& { return recording.frames[frames[at]]; };
  SampleCharge charge;
  charge.position = frames.size() - 1;
  bool python_seen = false;
  for (size_t at = frames.size(); at-- > 0;) {
    if (frame(at).kind == RecordedFrameKind::kPython) {
      charge.position = at;
      python_seen = true;
      break;
    }
  }
  if (memory) {
    charge.column = CostColumn::kMemory;
    return charge;
  }
  // Off CPU: the leaf says why; a stack under record --off-cpu's "[off-cpu]"
  // root without a reason still waited.
  const RecordedFrame& leaf = frame(frames.size() - 1);
  if (leaf.kind == RecordedFrameKind::kMarker) {
    if (std::optional<CostColumn> reason = OffCpuColumn(leaf.function)) {
      charge.column = *reason;
      return charge;
    }
  }
  if (frame(0).kind == RecordedFrameKind::kMarker && frame(0).function == kOffCpuRoot) {
    charge.column = CostColumn::kOtherWait;
    return charge;
  }
  // On CPU: the frames the charged line called, toward the leaf. Kernel
  // frames are always innermost; any native frame that is not the
  // interpreter's own means the line was in code it called (so do the
  // markers that stand for such code); the interpreter's own C frames are
  // the line's Python.
  if (leaf.kind == RecordedFrameKind::kKernel) {
    charge.column = CostColumn::kSystem;
    return charge;
  }
  size_t first = python_seen ? charge.position + 1 : charge.position;
  charge.column = CostColumn::kPython;
  for (size_t at = first; at < frames.size(); ++at) {
    const RecordedFrame& callee = frame(at);
    if (callee.kind == RecordedFrameKind::kNative ||
        (callee.kind == RecordedFrameKind::kMarker && IsUnwalkedNativeCode(callee.function))) {
      charge.column = CostColumn::kNative;
      break;
    }
  }
  // A stack of no Python (another process) that ended in a marker such as
  // "[unknown]" is still code that ran, just not Python's.
  if (!python_seen && charge.column == CostColumn::kPython &&
      leaf.kind != RecordedFrameKind::kInterpreter) {
    charge.column = CostColumn::kNative;
  }
  return charge;
}

}  // namespace pystrobe

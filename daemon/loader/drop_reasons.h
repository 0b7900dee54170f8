// The kernel's drop reasons as a C++ table, made from PYSTROBE_DROP_REASONS in
// the ABI header: each reason's metric label (pystrobe_dropped_total{reason})
// and the words `record`'s summary prints after its count.
#ifndef PYSTROBE_DAEMON_LOADER_DROP_REASONS_H_
#define PYSTROBE_DAEMON_LOADER_DROP_REASONS_H_

#include <array>
#include <string_view>

#include "bpf/pystrobe_abi.h"

namespace pystrobe {

struct DropReason {
  pystrobe_drop_reason reason;
  std::string_view metric_label;
  std::string_view summary_words;
};

inline constexpr std::array<DropReason, PYSTROBE_DROP_REASON_COUNT> kDropReasons = {{
#define PYSTROBE_DROP_ROW(name, label, words) {PYSTROBE_DROP_##name, label, words},
    PYSTROBE_DROP_REASONS(PYSTROBE_DROP_ROW)
#undef PYSTROBE_DROP_ROW
}};

// The row of `reason`; rows are in enum order, so this is an index.
constexpr const DropReason& DropReasonInfo(pystrobe_drop_reason reason) {
  return kDropReasons[reason];
}

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_LOADER_DROP_REASONS_H_

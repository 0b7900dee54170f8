// Where unwind tables and processes' mappings go to be used: the kernel's
// maps (daemon/loader/unwind_maps.h), or a fake in tests.
#ifndef PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_STORE_H_
#define PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_STORE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/unwind/unwind_table.h"

namespace pystrobe {

class UnwindTableStore {
 public:
  virtual ~UnwindTableStore() = default;
  // Makes `table` usable under `id` (an UnwindTableCache id).
  // ResourceExhausted when there is no room for its rows.
  virtual absl::Status LoadTable(uint32_t id, const UnwindTable& table) = 0;
  // Frees the room of table `id`; no mapping may name it any more.
  virtual void UnloadTable(uint32_t id) = 0;
  // Sets the executable mappings of process `pid`, sorted by start.
  virtual absl::Status SetProcessMappings(uint32_t pid,
                                          absl::Span<const pystrobe_unwind_mapping> mappings) = 0;
  virtual void RemoveProcess(uint32_t pid) = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_STORE_H_

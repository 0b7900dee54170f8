// Where unwind tables and processes' mappings go to be used: the kernel's
// maps (daemon/loader/unwind_maps.h), or a fake in tests.
#ifndef PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_STORE_H_
#define PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_STORE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/unwind/unwind_table.h"

namespace pystrobe {

class UnwindTableStore {
 public:
  virtual ~UnwindTableStore() = default;
  // Makes `table` usable under `id` (an UnwindTableCache id).
  // ResourceExhausted when there is no room for its rows (or rules).
  virtual absl::Status LoadTable(uint32_t id, const UnwindTable& table) = 0;
  // Frees the room of table `id`: a walk through it finds it absent and
  // asks for it (TakeWantedTables).
  virtual void UnloadTable(uint32_t id) = 0;
  // Table `id` will never be loaded: a walk through it ends, asking nothing.
  virtual void MarkUnavailable(uint32_t id) = 0;
  // The ids of absent tables walks asked for since the last call.
  virtual std::vector<uint32_t> TakeWantedTables() = 0;
  // When a walk last used table `id` (a monotonic clock's ns; 0: never).
  virtual uint64_t LastUsedNs(uint32_t id) = 0;
  // Sets the executable mappings of process `pid`, sorted by start.
  virtual absl::Status SetProcessMappings(uint32_t pid,
                                          absl::Span<const pystrobe_unwind_mapping> mappings) = 0;
  virtual void RemoveProcess(uint32_t pid) = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_UNWIND_UNWIND_TABLE_STORE_H_

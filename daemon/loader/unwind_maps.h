// The kernel's side of the unwind tables (bpf/unwind_tables.bpf.h): rows
// packed to 4 bytes against one rule dictionary (unwind_rules), rows and page
// entries placed in the two big array maps by a first-fit allocator, tables
// described in unwind_tables, processes' mappings in unwind_processes.
#ifndef PYSTROBE_DAEMON_LOADER_UNWIND_MAPS_H_
#define PYSTROBE_DAEMON_LOADER_UNWIND_MAPS_H_

#include <cstdint>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "daemon/unwind/unwind_table_store.h"

struct bpf_map;

namespace pystrobe {

// Ranges of [0, size) handed out first-fit and merged back when freed.
class RangeAllocator {
 public:
  explicit RangeAllocator(uint32_t size);
  // The start of `count` free units, or nullopt when no free run is long enough.
  std::optional<uint32_t> Allocate(uint32_t count);
  void Free(uint32_t start, uint32_t count);
  uint32_t used() const { return used_; }

 private:
  std::map<uint32_t, uint32_t> free_;  // start -> count
  uint32_t used_ = 0;
};

class UnwindMaps : public UnwindTableStore {
 public:
  struct Maps {
    bpf_map* rows;       // block index -> pystrobe_unwind_row_block
    bpf_map* pages;      // entry index -> u32
    bpf_map* tables;     // table id -> pystrobe_unwind_table
    bpf_map* processes;  // tgid -> pystrobe_unwind_process
    bpf_map* rules;      // rule index -> pystrobe_unwind_rule
    bpf_map* wanted;     // table id -> first ask's time
    // Bumped after every change to `processes` (each CPU keeps a note of
    // the process it walked last while this stands): the BPF object's
    // unwind_processes_generation, in its mapped .bss.
    __u64* processes_generation;
    // When a walk used each table lately, by id (PYSTROBE_UNWIND_MAX_TABLES
    // of them): the BPF object's unwind_table_used_ns, in its mapped .bss.
    __u64* table_used_ns;
  };
  explicit UnwindMaps(Maps maps);

  absl::Status LoadTable(uint32_t id, const UnwindTable& table) override;
  void UnloadTable(uint32_t id) override;
  void MarkUnavailable(uint32_t id) override;
  std::vector<uint32_t> TakeWantedTables() override;
  uint64_t LastUsedNs(uint32_t id) override;
  absl::Status SetProcessMappings(uint32_t pid,
                                  absl::Span<const pystrobe_unwind_mapping> mappings) override;
  void RemoveProcess(uint32_t pid) override;

  // Bytes of the kernel's rows and page entries in use, at most so far,
  // and in all.
  uint64_t bytes_used() const;
  uint64_t peak_bytes_used() const { return peak_bytes_used_; }
  uint64_t bytes_total() const;
  size_t tables_loaded() const { return placed_.size(); }
  size_t rules() const { return rule_index_.size(); }

 private:
  // After every write or removal in maps_.processes: voids each CPU's note.
  void ProcessesChanged();

  struct Placement {
    uint32_t first_block = 0, blocks = 0;
    uint32_t first_page = 0, pages = 0;
  };
  // The index of `row`'s rule in unwind_rules, written there when new.
  absl::StatusOr<uint16_t> RuleIndex(const pystrobe_unwind_row& row);
  void WriteEntry(uint32_t id, const pystrobe_unwind_table& entry);

  Maps maps_;
  absl::flat_hash_map<uint64_t, uint16_t> rule_index_;  // packed rule -> index
  RangeAllocator blocks_;
  RangeAllocator pages_;
  uint32_t block_capacity_;
  uint32_t page_capacity_;
  absl::flat_hash_map<uint32_t, Placement> placed_;
  uint64_t peak_bytes_used_ = 0;
  // The generation of the last process mappings written: the kernel keeps
  // the rules it found for a process's pcs while its generation stands.
  uint32_t last_generation_ = 0;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_LOADER_UNWIND_MAPS_H_

#include "daemon/loader/unwind_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/loader/libbpf_errors.h"

namespace pystrobe {
namespace {

// Writes values[i] at keys first..first+n-1 of an array map, in batches.
template <typename T>
absl::Status WriteArray(bpf_map* map, uint32_t first, const std::vector<T>& values,
                        const char* what) {
  std::vector<uint32_t> keys(values.size());
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = first + static_cast<uint32_t>(i);
  size_t done = 0;
  while (done < values.size()) {
    uint32_t count = static_cast<uint32_t>(std::min<size_t>(values.size() - done, 65536));
    if (bpf_map_update_batch(bpf_map__fd(map), keys.data() + done, values.data() + done, &count,
                             nullptr) != 0) {
      return LibbpfError(-errno, absl::StrCat("write unwind ", what));
    }
    done += count;
  }
  return absl::OkStatus();
}

}  // namespace

RangeAllocator::RangeAllocator(uint32_t size) {
  if (size > 0) free_[0] = size;
}

std::optional<uint32_t> RangeAllocator::Allocate(uint32_t count) {
  if (count == 0) return 0;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < count) continue;
    uint32_t start = it->first, left = it->second - count;
    free_.erase(it);
    if (left > 0) free_[start + count] = left;
    used_ += count;
    return start;
  }
  return std::nullopt;
}

void RangeAllocator::Free(uint32_t start, uint32_t count) {
  if (count == 0) return;
  used_ -= count;
  auto [it, inserted] = free_.emplace(start, count);
  // Merge with the free run after, then the one before.
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

UnwindMaps::UnwindMaps(Maps maps)
    : maps_(maps),
      blocks_(bpf_map__max_entries(maps.rows)),
      pages_(bpf_map__max_entries(maps.pages)),
      block_capacity_(bpf_map__max_entries(maps.rows)),
      page_capacity_(bpf_map__max_entries(maps.pages)) {}

absl::StatusOr<uint16_t> UnwindMaps::RuleIndex(const pystrobe_unwind_row& row) {
  pystrobe_unwind_rule rule{};
  if (row.cfa_rule != PYSTROBE_UNWIND_CFA_INVALID) {
    rule = {row.cfa_offset, row.rbp_offset, row.cfa_rule, row.rbp_rule};
  }
  uint64_t packed;
  static_assert(sizeof(packed) == sizeof(rule));
  std::memcpy(&packed, &rule, sizeof(rule));
  if (packed == 0) return 0;  // index 0: the INVALID rule, all zeroes
  auto it = rule_index_.find(packed);
  if (it != rule_index_.end()) return it->second;
  uint32_t index = static_cast<uint32_t>(rule_index_.size()) + 1;
  if (index >= std::min<uint32_t>(PYSTROBE_UNWIND_MAX_RULES, bpf_map__max_entries(maps_.rules))) {
    return absl::ResourceExhaustedError("the unwind rule dictionary is full");
  }
  if (bpf_map__update_elem(maps_.rules, &index, sizeof(index), &rule, sizeof(rule), BPF_ANY) != 0) {
    return LibbpfError(-errno, "write an unwind rule");
  }
  rule_index_.emplace(packed, static_cast<uint16_t>(index));
  return static_cast<uint16_t>(index);
}

void UnwindMaps::WriteEntry(uint32_t id, const pystrobe_unwind_table& entry) {
  bpf_map__update_elem(maps_.tables, &id, sizeof(id), &entry, sizeof(entry), BPF_ANY);
}

absl::Status UnwindMaps::LoadTable(uint32_t id, const UnwindTable& table) {
  if (id >= std::min<uint32_t>(PYSTROBE_UNWIND_MAX_TABLES, bpf_map__max_entries(maps_.tables))) {
    return absl::ResourceExhaustedError(absl::StrCat("unwind table id ", id, " past the map"));
  }
  UnloadTable(id);
  // Packed before any room is taken: a full dictionary fails the load whole.
  std::vector<pystrobe_unwind_row_block> rows(
      (table.rows.size() + PYSTROBE_UNWIND_ROWS_PER_BLOCK - 1) / PYSTROBE_UNWIND_ROWS_PER_BLOCK);
  std::memset(rows.data(), 0, rows.size() * sizeof(rows[0]));
  for (size_t i = 0; i < table.rows.size(); ++i) {
    absl::StatusOr<uint16_t> rule = RuleIndex(table.rows[i]);
    if (!rule.ok()) return rule.status();
    pystrobe_unwind_packed_row& packed =
        rows[i / PYSTROBE_UNWIND_ROWS_PER_BLOCK].rows[i % PYSTROBE_UNWIND_ROWS_PER_BLOCK];
    packed.addr_low = static_cast<uint16_t>(table.rows[i].addr);
    packed.rule = *rule;
  }
  Placement placed;
  placed.blocks = static_cast<uint32_t>(rows.size());
  placed.pages = static_cast<uint32_t>(table.pages.size());
  std::optional<uint32_t> blocks = blocks_.Allocate(placed.blocks);
  if (!blocks) {
    return absl::ResourceExhaustedError(
        absl::StrCat("no room for ", table.rows.size(), " unwind rows"));
  }
  std::optional<uint32_t> pages = pages_.Allocate(placed.pages);
  if (!pages) {
    blocks_.Free(*blocks, placed.blocks);
    return absl::ResourceExhaustedError(
        absl::StrCat("no room for ", table.pages.size(), " unwind page entries"));
  }
  placed.first_block = *blocks;
  placed.first_page = *pages;

  absl::Status status = WriteArray(maps_.rows, placed.first_block, rows, "rows");
  if (status.ok()) status = WriteArray(maps_.pages, placed.first_page, table.pages, "pages");
  pystrobe_unwind_table entry{};
  entry.first_row = placed.first_block * PYSTROBE_UNWIND_ROWS_PER_BLOCK;
  entry.row_count = static_cast<uint32_t>(table.rows.size());
  entry.first_page_entry = placed.first_page;
  entry.page_count = placed.pages;
  entry.first_page = table.first_page;
  entry.state = PYSTROBE_UNWIND_TABLE_LOADED;
  if (status.ok() &&
      bpf_map__update_elem(maps_.tables, &id, sizeof(id), &entry, sizeof(entry), BPF_ANY) != 0) {
    status = LibbpfError(-errno, "write an unwind table's entry");
  }
  if (!status.ok()) {
    blocks_.Free(placed.first_block, placed.blocks);
    pages_.Free(placed.first_page, placed.pages);
    return status;
  }
  placed_[id] = placed;
  // Not walked yet: the first to make room for another, as it always was.
  __atomic_store_n(&maps_.table_used_ns[id], 0, __ATOMIC_RELAXED);
  peak_bytes_used_ = std::max(peak_bytes_used_, bytes_used());
  return absl::OkStatus();
}

void UnwindMaps::UnloadTable(uint32_t id) {
  // Absent: a walk that still finds this id finds no row, and asks.
  pystrobe_unwind_table absent{};
  absent.state = PYSTROBE_UNWIND_TABLE_ABSENT;
  WriteEntry(id, absent);
  auto it = placed_.find(id);
  if (it == placed_.end()) return;
  blocks_.Free(it->second.first_block, it->second.blocks);
  pages_.Free(it->second.first_page, it->second.pages);
  placed_.erase(it);
}

void UnwindMaps::MarkUnavailable(uint32_t id) {
  UnloadTable(id);
  pystrobe_unwind_table unavailable{};
  unavailable.state = PYSTROBE_UNWIND_TABLE_UNAVAILABLE;
  WriteEntry(id, unavailable);
}

std::vector<uint32_t> UnwindMaps::TakeWantedTables() {
  std::vector<uint32_t> ids;
  uint32_t key, next;
  const uint32_t* previous = nullptr;
  while (bpf_map__get_next_key(maps_.wanted, previous, &next, sizeof(next)) == 0) {
    ids.push_back(next);
    key = next;
    previous = &key;
  }
  for (uint32_t id : ids) bpf_map__delete_elem(maps_.wanted, &id, sizeof(id), 0);
  return ids;
}

uint64_t UnwindMaps::LastUsedNs(uint32_t id) {
  if (id >= PYSTROBE_UNWIND_MAX_TABLES) return 0;
  return __atomic_load_n(&maps_.table_used_ns[id], __ATOMIC_RELAXED);
}

absl::Status UnwindMaps::SetProcessMappings(uint32_t pid,
                                            absl::Span<const pystrobe_unwind_mapping> mappings) {
  static thread_local pystrobe_unwind_process value;
  std::memset(&value, 0, sizeof(value));
  value.count =
      static_cast<uint32_t>(std::min<size_t>(mappings.size(), PYSTROBE_UNWIND_MAX_MAPPINGS));
  std::memcpy(value.mappings, mappings.data(), value.count * sizeof(mappings[0]));
  // New with every write, never 0, so no process (nor a pid reused) meets
  // rules cached for other mappings.
  if (++last_generation_ == 0) ++last_generation_;
  value.generation = last_generation_;
  if (bpf_map__update_elem(maps_.processes, &pid, sizeof(pid), &value, sizeof(value), BPF_ANY) !=
      0) {
    return LibbpfError(-errno, absl::StrCat("write the mappings of process ", pid));
  }
  ProcessesChanged();
  return absl::OkStatus();
}

void UnwindMaps::RemoveProcess(uint32_t pid) {
  if (bpf_map__delete_elem(maps_.processes, &pid, sizeof(pid), 0) == 0) ProcessesChanged();
}

void UnwindMaps::ProcessesChanged() {
  __atomic_fetch_add(maps_.processes_generation, 1, __ATOMIC_SEQ_CST);
}

uint64_t UnwindMaps::bytes_used() const {
  return uint64_t{blocks_.used()} * sizeof(pystrobe_unwind_row_block) + uint64_t{pages_.used()} * 4;
}

uint64_t UnwindMaps::bytes_total() const {
  return uint64_t{block_capacity_} * sizeof(pystrobe_unwind_row_block) +
         uint64_t{page_capacity_} * 4;
}

}  // namespace pystrobe

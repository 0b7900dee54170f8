#include "daemon/python/code_copies.h"

#include <cstddef>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bpf/pystrobe_abi.h"

namespace pystrobe {

absl::Status CopiedMemory::Read(uint64_t address, void* out, size_t size) const {
  for (const Region& region : regions_) {
    if (address >= region.address && size <= region.bytes.size() &&
        address - region.address <= region.bytes.size() - size) {
      std::memcpy(out, region.bytes.data() + (address - region.address), size);
      return absl::OkStatus();
    }
  }
  return absl::OutOfRangeError(
      absl::StrFormat("%u bytes at 0x%x are not in the kernel's copy", size, address));
}

size_t CopiedMemory::bytes() const {
  size_t total = 0;
  for (const Region& region : regions_) total += region.bytes.size();
  return total;
}

absl::StatusOr<PythonCodeCopy> ParsePythonCodeCopy(std::span<const uint8_t> record) {
  constexpr size_t kHeaderSize = offsetof(pystrobe_python_code_event, data);
  pystrobe_python_code_event header;
  if (record.size() < kHeaderSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("code copy record of ", record.size(), " bytes, shorter than its header"));
  }
  std::memcpy(&header, record.data(), kHeaderSize);
  if (header.regions_used > PYSTROBE_CODE_REGIONS) {
    return absl::InvalidArgumentError(
        absl::StrCat("code copy record with ", header.regions_used, " regions"));
  }
  const std::span<const uint8_t> data = record.subspan(kHeaderSize);
  std::vector<CopiedMemory::Region> regions;
  for (uint32_t i = 0; i < header.regions_used; ++i) {
    const pystrobe_memory_region& region = header.regions[i];
    if (region.offset > data.size() || region.size > data.size() - region.offset) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "code copy region %u (%u bytes at %u) runs past the record's %u bytes of data", i,
          region.size, region.offset, data.size()));
    }
    const uint8_t* bytes = data.data() + region.offset;
    regions.push_back({region.address, std::vector<uint8_t>(bytes, bytes + region.size)});
  }
  return PythonCodeCopy{header.pid, header.code, header.stamp, CopiedMemory(std::move(regions))};
}

void PythonCodeCopies::Add(PythonCodeCopy copy) {
  ++received_;
  const size_t bytes = copy.memory.bytes();
  if (copies_.size() >= kMaxCopies || bytes_ + bytes > kMaxBytes) {
    ++dropped_;
    return;
  }
  auto [it, inserted] =
      copies_.try_emplace(std::make_tuple(copy.pid, copy.code, copy.stamp), std::move(copy.memory));
  if (inserted) bytes_ += bytes;
}

std::optional<CopiedMemory> PythonCodeCopies::Take(uint32_t pid, uint64_t code, uint32_t stamp) {
  auto it = copies_.find(std::make_tuple(pid, code, stamp));
  if (it == copies_.end()) return std::nullopt;
  CopiedMemory memory = std::move(it->second);
  copies_.erase(it);
  bytes_ -= memory.bytes();
  return memory;
}

void PythonCodeCopies::ForgetProcess(uint32_t pid) {
  auto first = copies_.lower_bound(std::make_tuple(pid, uint64_t{0}, uint32_t{0}));
  auto last = copies_.upper_bound(std::make_tuple(pid, UINT64_MAX, UINT32_MAX));
  for (auto it = first; it != last; ++it) bytes_ -= it->second.bytes();
  copies_.erase(first, last);
}

}  // namespace pystrobe

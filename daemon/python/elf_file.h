// A small, bounds-checked reader of 64-bit little-endian ELF files: symbols,
// loadable segments and read-only data, enough to find CPython in a binary.
#ifndef PYSTROBE_DAEMON_PYTHON_ELF_FILE_H_
#define PYSTROBE_DAEMON_PYTHON_ELF_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pystrobe {

struct ElfSymbol {
  uint64_t value = 0;  // link-time virtual address
  uint64_t size = 0;

  friend bool operator==(const ElfSymbol&, const ElfSymbol&) = default;
};

// What tells one binary's contents from another's without reading them: a
// file replaced or rewritten gets another inode, size or modification time.
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;

  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const FileIdentity& id) {
    return H::combine(std::move(h), id.device, id.inode, id.size, id.mtime_ns);
  }
};

struct ElfLoadSegment {
  uint64_t vaddr = 0;
  uint64_t offset = 0;
  uint64_t file_size = 0;
  uint64_t mem_size = 0;
};

class ElfFile {
 public:
  // Maps `path` read-only. Fails for anything but ELF64 little-endian.
  static absl::StatusOr<ElfFile> Open(const std::string& path);

  ElfFile(ElfFile&&) noexcept;
  ElfFile& operator=(ElfFile&&) noexcept;
  ~ElfFile();

  // Defined symbols among `names`, from .symtab and .dynsym (.symtab wins).
  absl::flat_hash_map<std::string, ElfSymbol> FindSymbols(
      absl::Span<const absl::string_view> names) const;

  const std::vector<ElfLoadSegment>& load_segments() const { return load_segments_; }
  const FileIdentity& identity() const { return identity_; }

  // The contents of section `name` (e.g. ".rodata"), empty when absent.
  absl::Span<const uint8_t> Section(absl::string_view name) const;

 private:
  ElfFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  absl::Status Parse();
  // `count` objects of `item_size` bytes at `offset`, or an empty span when out of bounds.
  absl::Span<const uint8_t> Bytes(uint64_t offset, uint64_t count, uint64_t item_size) const;

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  FileIdentity identity_;
  std::vector<ElfLoadSegment> load_segments_;
  struct SectionInfo {
    std::string name;
    uint32_t type = 0;
    uint32_t link = 0;
    uint64_t offset = 0;
    uint64_t size = 0;
    uint64_t entry_size = 0;
  };
  std::vector<SectionInfo> sections_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_ELF_FILE_H_

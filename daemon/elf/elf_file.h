// The one reader of ELF files below every layer that needs one: a
// bounds-checked view of a 64-bit little-endian file mapped read-only, with
// its symbols, loadable segments, sections (compressed ones inflated), GNU
// build id and .gnu_debuglink. CPython discovery reads symbols and .rodata
// with it, the unwind tables .eh_frame and .debug_frame; the symbolizer's
// identity reads only headers and notes (a few preads of a file it never
// maps) and shares the notes' parser.
#ifndef PYSTROBE_DAEMON_ELF_ELF_FILE_H_
#define PYSTROBE_DAEMON_ELF_ELF_FILE_H_

#include <cstdint>
#include <optional>
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

// A PT_LOAD program header.
struct ElfLoadSegment {
  uint64_t vaddr = 0;
  uint64_t offset = 0;
  uint64_t file_size = 0;
  uint64_t mem_size = 0;
  bool executable = false;  // PF_X

  friend bool operator==(const ElfLoadSegment&, const ElfLoadSegment&) = default;
};

// A section header, as far as its readers care.
struct ElfSection {
  std::string name;
  uint32_t type = 0;
  uint64_t flags = 0;
  uint64_t address = 0;  // link-time virtual address (sh_addr)
  uint32_t link = 0;
  uint64_t offset = 0;
  uint64_t size = 0;  // 0 for SHT_NOBITS: nothing of it is in the file
  uint64_t entry_size = 0;
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
  uint16_t machine() const { return machine_; }  // e_machine, e.g. EM_X86_64
  // The NT_GNU_BUILD_ID note, in lowercase hex as `readelf -n` prints it
  // (from a PT_NOTE segment, else .note.gnu.build-id); "" when none.
  const std::string& build_id() const { return build_id_; }
  // The separate debug file's name in .gnu_debuglink; "" when none.
  const std::string& debuglink() const { return debuglink_; }

  // Where the functions with call frame information start (link-time,
  // sorted), from .eh_frame_hdr's search table: every function, symbol or
  // not, the parts GCC splits off (.cold) included. Empty when the section
  // is absent or its table uses an encoding other than the usual datarel
  // sdata4 pairs.
  std::vector<uint64_t> FunctionStarts() const;

  // The header of section `name`, or null when absent.
  const ElfSection* FindSection(absl::string_view name) const;
  // The contents of section `name` (e.g. ".rodata") as they are in the
  // file, empty when absent.
  absl::Span<const uint8_t> Section(absl::string_view name) const;
  // The contents of `section` inflated when SHF_COMPRESSED (zlib, as
  // separate debug files often are); empty when absent, NOBITS or unreadable.
  std::vector<uint8_t> SectionBytes(const ElfSection* section) const;

 private:
  ElfFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  absl::Status Parse();
  // `count` objects of `item_size` bytes at `offset`, or an empty span when out of bounds.
  absl::Span<const uint8_t> Bytes(uint64_t offset, uint64_t count, uint64_t item_size) const;

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  FileIdentity identity_;
  uint16_t machine_ = 0;
  std::vector<ElfLoadSegment> load_segments_;
  std::vector<ElfSection> sections_;
  std::string build_id_;
  std::string debuglink_;
};

// The GNU build id in a run of ELF notes (a PT_NOTE segment, a
// .note.gnu.build-id section, or /sys/kernel/notes, which is the kernel's
// notes as is), in lowercase hex; `align` is the segment's alignment (4 or
// 8). nullopt when no NT_GNU_BUILD_ID is there.
std::optional<std::string> GnuBuildIdInNotes(absl::string_view notes, size_t align = 4);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_ELF_ELF_FILE_H_

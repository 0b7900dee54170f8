// The one reader of ELF files below every layer that needs one: a
// bounds-checked view of a little-endian file mapped read-only (or of an
// image mapped in this process, the vDSO), with its header, symbols,
// loadable segments, sections (compressed ones inflated), GNU build id and
// .gnu_debuglink. CPython discovery reads symbols and .rodata with it, the
// unwind tables .eh_frame and .debug_frame, the native symbolizer every
// function symbol of a file and of its separate debug file
// (debug_file.h), the unwind tracker the vDSO's image.
#ifndef PYSTROBE_DAEMON_ELF_ELF_FILE_H_
#define PYSTROBE_DAEMON_ELF_ELF_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
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

// One entry of .symtab or .dynsym, whatever its type.
struct ElfSymbolEntry {
  // As the string table holds it (no "@VERSION"), empty when unnamed or
  // when the name runs off its table; name.data() is NUL-terminated. Valid
  // while the ElfFile lives.
  absl::string_view name;
  uint64_t value = 0;  // st_value: a link-time virtual address for functions
  uint64_t size = 0;
  uint8_t type = 0;      // STT_FUNC, STT_GNU_IFUNC, STT_OBJECT, ...
  uint8_t binding = 0;   // STB_LOCAL, STB_GLOBAL, STB_WEAK
  uint16_t section = 0;  // st_shndx: SHN_UNDEF for symbols defined elsewhere
  uint32_t table = 0;    // the index of the section that lists it (.symtab, .dynsym)
};

struct ElfOpenOptions {
  // Also ELF32 files. Off by default: readers of structures in .rodata or
  // of unwind rules assume 64-bit addresses in the contents; readers of
  // symbols and notes do not (a 32-bit process's libraries are named too).
  bool allow_32bit = false;
};

class ElfFile {
 public:
  // Maps `path` read-only. Fails for anything but little-endian ELF64 (and
  // ELF32 where `options` allow it); errors name the file.
  static absl::StatusOr<ElfFile> Open(const std::string& path, ElfOpenOptions options = {});
  // A view of an ELF image already mapped whole in this process, which must
  // outlive the ElfFile (the vDSO: VdsoImage()); `name` is for errors.
  static absl::StatusOr<ElfFile> InMemory(absl::Span<const uint8_t> image, std::string name,
                                          ElfOpenOptions options = {});

  ElfFile(ElfFile&&) noexcept;
  ElfFile& operator=(ElfFile&&) noexcept;
  ~ElfFile();

  // Defined symbols among `names`, from .symtab and .dynsym (.symtab wins;
  // a table ForEachSymbol would refuse is passed over).
  absl::flat_hash_map<std::string, ElfSymbol> FindSymbols(
      absl::Span<const absl::string_view> names) const;

  // Calls `visit` with every entry of every SHT_SYMTAB section, then of every
  // SHT_DYNSYM one, in section order (index 0, the null entry, included, as
  // readelf lists it). Fails, having visited nothing, when a symbol table
  // lies outside the file, has entries of another size than the class's,
  // or links to something other than a string table within the file; the
  // error names the file and the section.
  absl::Status ForEachSymbol(absl::FunctionRef<void(const ElfSymbolEntry&)> visit) const;

  const std::vector<ElfLoadSegment>& load_segments() const { return load_segments_; }
  const FileIdentity& identity() const { return identity_; }
  // The path it was opened at, or the in-memory image's name.
  const std::string& name() const { return name_; }
  bool is_64bit() const { return is_64bit_; }
  uint16_t type() const { return type_; }        // e_type, e.g. ET_DYN
  uint16_t machine() const { return machine_; }  // e_machine, e.g. EM_X86_64
  // The NT_GNU_BUILD_ID note, in lowercase hex as `readelf -n` prints it
  // (from a PT_NOTE segment, else .note.gnu.build-id); "" when none.
  const std::string& build_id() const { return build_id_; }
  // The separate debug file's name in .gnu_debuglink; "" when none.
  const std::string& debuglink() const { return debuglink_; }
  // The CRC-32 of the debug file that .gnu_debuglink names (its last four
  // bytes); 0 when there is no link.
  uint32_t debuglink_crc() const { return debuglink_crc_; }

  // Where the functions with call frame information start (link-time,
  // sorted), from .eh_frame_hdr's search table: every function, symbol or
  // not, the parts GCC splits off (.cold) included. Empty when the section
  // is absent or its table uses an encoding other than the usual datarel
  // sdata4 pairs.
  std::vector<uint64_t> FunctionStarts() const;

  // Every section header, in the file's order (index 0 is the null one).
  const std::vector<ElfSection>& sections() const { return sections_; }
  // The header of section `name`, or null when absent.
  const ElfSection* FindSection(absl::string_view name) const;
  // The contents of section `name` (e.g. ".rodata") as they are in the
  // file, empty when absent.
  absl::Span<const uint8_t> Section(absl::string_view name) const;
  // The contents of `section` inflated when SHF_COMPRESSED (zlib, as
  // separate debug files often are); empty when absent, NOBITS or unreadable.
  std::vector<uint8_t> SectionBytes(const ElfSection* section) const;

 private:
  struct Elf32;  // The structures of each class (elf_file.cc).
  struct Elf64;

  ElfFile(const uint8_t* data, size_t size, bool mapped, std::string name)
      : data_(data), size_(size), mapped_(mapped), name_(std::move(name)) {}
  // Checks the identification bytes, then parses with the class's structures.
  absl::Status Parse(ElfOpenOptions options);
  template <typename Class>
  void ParseHeaders();
  template <typename Class>
  void VisitSymbols(size_t table, absl::Span<const uint8_t> strings,
                    absl::FunctionRef<void(const ElfSymbolEntry&)> visit) const;
  // Visits the entries of section `index`, a symbol table CheckSymbolTable
  // found whole, with the structures of the file's class.
  void VisitTable(size_t index, absl::FunctionRef<void(const ElfSymbolEntry&)> visit) const;
  // The error of a symbol table that cannot be read whole; OK when it can.
  absl::Status CheckSymbolTable(size_t index) const;
  // `count` objects of `item_size` bytes at `offset`, or an empty span when out of bounds.
  absl::Span<const uint8_t> Bytes(uint64_t offset, uint64_t count, uint64_t item_size) const;
  bool InFile(uint64_t offset, uint64_t size) const {
    return offset <= size_ && size <= size_ - offset;
  }

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;  // data_ is our mapping of the file, unmapped with us
  std::string name_;
  FileIdentity identity_;
  bool is_64bit_ = true;
  uint16_t type_ = 0;
  uint16_t machine_ = 0;
  std::vector<ElfLoadSegment> load_segments_;
  std::vector<ElfSection> sections_;
  std::string build_id_;
  std::string debuglink_;
  uint32_t debuglink_crc_ = 0;
};

// The vDSO image this process maps (every process of this kernel maps the
// same one), found through the auxiliary vector and sized by its headers;
// empty when there is none or its headers are implausible.
absl::Span<const uint8_t> VdsoImage();

// The GNU build id in a run of ELF notes (a PT_NOTE segment, a
// .note.gnu.build-id section, or /sys/kernel/notes, which is the kernel's
// notes as is), in lowercase hex; `align` is the segment's alignment (4 or
// 8). nullopt when no NT_GNU_BUILD_ID is there.
std::optional<std::string> GnuBuildIdInNotes(absl::string_view notes, size_t align = 4);

// The running kernel's build id from `notes_path`; "" when unknown.
std::string ReadKernelBuildId(const std::string& notes_path = "/sys/kernel/notes");

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_ELF_ELF_FILE_H_

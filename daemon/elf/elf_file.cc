#include "daemon/elf/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace pystrobe {
namespace {

// A NUL-terminated string inside `table`, or empty when it runs off the end.
absl::string_view StringAt(absl::Span<const uint8_t> table, uint64_t offset) {
  if (offset >= table.size()) return {};
  const char* start = reinterpret_cast<const char*>(table.data() + offset);
  const void* end = std::memchr(start, '\0', table.size() - offset);
  if (end == nullptr) return {};
  return absl::string_view(start, static_cast<const char*>(end) - start);
}

size_t AlignUp(size_t value, size_t align) { return (value + align - 1) / align * align; }

// Inflated sections larger than this are refused: no section a reader
// wants is near it, and a corrupt header must not allocate gigabytes.
constexpr uint64_t kMaxInflatedBytes = uint64_t{1} << 31;

}  // namespace

std::optional<std::string> GnuBuildIdInNotes(absl::string_view notes, size_t align) {
  // Each note: namesz, descsz, type (32-bit in both classes), then the name
  // and the descriptor, each padded to the alignment.
  Elf64_Nhdr note;
  for (size_t at = 0; notes.size() - at >= sizeof(note);) {
    std::memcpy(&note, notes.data() + at, sizeof(note));
    size_t name_at = at + sizeof(note);
    size_t desc_at = name_at + AlignUp(note.n_namesz, align);
    if (note.n_namesz > notes.size() || note.n_descsz > notes.size() ||
        desc_at + note.n_descsz > notes.size()) {
      return std::nullopt;
    }
    // The name is "GNU" with its NUL.
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == sizeof(ELF_NOTE_GNU) &&
        std::memcmp(notes.data() + name_at, ELF_NOTE_GNU, sizeof(ELF_NOTE_GNU)) == 0 &&
        note.n_descsz > 0) {
      return absl::BytesToHexString(notes.substr(desc_at, note.n_descsz));
    }
    at = desc_at + AlignUp(note.n_descsz, align);
  }
  return std::nullopt;
}

absl::StatusOr<ElfFile> ElfFile::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an ELF file (too small)"));
  }
  void* map = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("mmap ", path, ": ", std::strerror(errno)));
  }
  ElfFile file(static_cast<const uint8_t*>(map), static_cast<size_t>(st.st_size));
  file.identity_ = {
      .device = static_cast<uint64_t>(st.st_dev),
      .inode = static_cast<uint64_t>(st.st_ino),
      .size = static_cast<uint64_t>(st.st_size),
      .mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  if (absl::Status status = file.Parse(); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
  }
  return file;
}

ElfFile::ElfFile(ElfFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      identity_(other.identity_),
      machine_(other.machine_),
      load_segments_(std::move(other.load_segments_)),
      sections_(std::move(other.sections_)),
      build_id_(std::move(other.build_id_)),
      debuglink_(std::move(other.debuglink_)) {}

ElfFile& ElfFile::operator=(ElfFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    identity_ = other.identity_;
    machine_ = other.machine_;
    load_segments_ = std::move(other.load_segments_);
    sections_ = std::move(other.sections_);
    build_id_ = std::move(other.build_id_);
    debuglink_ = std::move(other.debuglink_);
  }
  return *this;
}

ElfFile::~ElfFile() {
  if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
}

absl::Span<const uint8_t> ElfFile::Bytes(uint64_t offset, uint64_t count,
                                         uint64_t item_size) const {
  if (item_size != 0 && count > size_ / item_size) return {};
  const uint64_t length = count * item_size;
  if (offset > size_ || length > size_ - offset) return {};
  return absl::Span<const uint8_t>(data_ + offset, length);
}

absl::Status ElfFile::Parse() {
  Elf64_Ehdr header;
  std::memcpy(&header, data_, sizeof(header));
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    return absl::InvalidArgumentError("not an ELF file");
  }
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB) {
    return absl::UnimplementedError("only 64-bit little-endian ELF is supported");
  }
  machine_ = header.e_machine;
  auto as_view = [](absl::Span<const uint8_t> bytes) {
    return absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  };
  if (header.e_phentsize == sizeof(Elf64_Phdr)) {
    absl::Span<const uint8_t> phdrs = Bytes(header.e_phoff, header.e_phnum, sizeof(Elf64_Phdr));
    for (size_t i = 0; i * sizeof(Elf64_Phdr) < phdrs.size(); ++i) {
      Elf64_Phdr ph;
      std::memcpy(&ph, phdrs.data() + i * sizeof(ph), sizeof(ph));
      if (ph.p_type == PT_LOAD) {
        load_segments_.push_back(
            {ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz, (ph.p_flags & PF_X) != 0});
      } else if (ph.p_type == PT_NOTE && build_id_.empty()) {
        build_id_ =
            GnuBuildIdInNotes(as_view(Bytes(ph.p_offset, ph.p_filesz, 1)), ph.p_align == 8 ? 8 : 4)
                .value_or("");
      }
    }
  }
  if (header.e_shentsize != sizeof(Elf64_Shdr)) return absl::OkStatus();
  absl::Span<const uint8_t> shdrs = Bytes(header.e_shoff, header.e_shnum, sizeof(Elf64_Shdr));
  std::vector<Elf64_Shdr> raw(shdrs.size() / sizeof(Elf64_Shdr));
  if (!raw.empty()) std::memcpy(raw.data(), shdrs.data(), shdrs.size());
  absl::Span<const uint8_t> names;
  if (header.e_shstrndx < raw.size()) {
    const Elf64_Shdr& strtab = raw[header.e_shstrndx];
    names = Bytes(strtab.sh_offset, strtab.sh_size, 1);
  }
  for (const Elf64_Shdr& sh : raw) {
    sections_.push_back({.name = std::string(StringAt(names, sh.sh_name)),
                         .type = sh.sh_type,
                         .flags = sh.sh_flags,
                         .address = sh.sh_addr,
                         .link = sh.sh_link,
                         .offset = sh.sh_offset,
                         .size = sh.sh_type == SHT_NOBITS ? 0 : sh.sh_size,
                         .entry_size = sh.sh_entsize});
  }
  if (build_id_.empty()) {
    build_id_ = GnuBuildIdInNotes(as_view(Section(".note.gnu.build-id"))).value_or("");
  }
  absl::Span<const uint8_t> debuglink = Section(".gnu_debuglink");
  debuglink_ = std::string(as_view(debuglink).substr(0, as_view(debuglink).find('\0')));
  return absl::OkStatus();
}

absl::flat_hash_map<std::string, ElfSymbol> ElfFile::FindSymbols(
    absl::Span<const absl::string_view> names) const {
  absl::flat_hash_set<absl::string_view> wanted(names.begin(), names.end());
  absl::flat_hash_map<std::string, ElfSymbol> found;
  for (uint32_t type : {SHT_SYMTAB, SHT_DYNSYM}) {
    for (const ElfSection& section : sections_) {
      if (section.type != type || section.entry_size != sizeof(Elf64_Sym) ||
          section.link >= sections_.size()) {
        continue;
      }
      const ElfSection& strings = sections_[section.link];
      absl::Span<const uint8_t> string_table = Bytes(strings.offset, strings.size, 1);
      absl::Span<const uint8_t> symbols =
          Bytes(section.offset, section.size / sizeof(Elf64_Sym), sizeof(Elf64_Sym));
      for (size_t i = 0; i * sizeof(Elf64_Sym) < symbols.size(); ++i) {
        Elf64_Sym sym;
        std::memcpy(&sym, symbols.data() + i * sizeof(sym), sizeof(sym));
        if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
        absl::string_view name = StringAt(string_table, sym.st_name);
        if (!wanted.contains(name)) continue;
        found.try_emplace(std::string(name), ElfSymbol{sym.st_value, sym.st_size});
      }
    }
  }
  return found;
}

const ElfSection* ElfFile::FindSection(absl::string_view name) const {
  for (const ElfSection& section : sections_) {
    if (section.name == name) return &section;
  }
  return nullptr;
}

std::vector<uint64_t> ElfFile::FunctionStarts() const {
  // .eh_frame_hdr: version 1, three pointer encodings, the (encoded) address
  // of .eh_frame, the FDE count, then (initial location, FDE address) pairs
  // sorted by location, each relative to the section's own address.
  constexpr uint8_t kUdata4 = 0x03, kSdata4 = 0x0b, kPcRel = 0x10, kDataRel = 0x30;
  const ElfSection* header = FindSection(".eh_frame_hdr");
  if (header == nullptr) return {};
  absl::Span<const uint8_t> bytes = Bytes(header->offset, header->size, 1);
  if (bytes.size() < 12 || bytes[0] != 1 ||
      (bytes[1] != (kPcRel | kSdata4) && bytes[1] != kSdata4) || bytes[2] != kUdata4 ||
      bytes[3] != (kDataRel | kSdata4)) {
    return {};
  }
  uint32_t count;
  std::memcpy(&count, bytes.data() + 8, sizeof(count));
  constexpr size_t kTable = 12, kPair = 8;
  if (count > (bytes.size() - kTable) / kPair) return {};
  std::vector<uint64_t> starts;
  starts.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    int32_t location;
    std::memcpy(&location, bytes.data() + kTable + i * kPair, sizeof(location));
    starts.push_back(header->address + static_cast<int64_t>(location));
  }
  // Sorted by the linker; a table that is not is not trusted to be.
  std::sort(starts.begin(), starts.end());
  return starts;
}

absl::Span<const uint8_t> ElfFile::Section(absl::string_view name) const {
  const ElfSection* section = FindSection(name);
  return section ? Bytes(section->offset, section->size, 1) : absl::Span<const uint8_t>();
}

std::vector<uint8_t> ElfFile::SectionBytes(const ElfSection* section) const {
  if (section == nullptr) return {};
  absl::Span<const uint8_t> bytes = Bytes(section->offset, section->size, 1);
  if (bytes.empty()) return {};
  if ((section->flags & SHF_COMPRESSED) == 0) return {bytes.begin(), bytes.end()};
  Elf64_Chdr compressed;
  if (bytes.size() < sizeof(compressed)) return {};
  std::memcpy(&compressed, bytes.data(), sizeof(compressed));
  if (compressed.ch_type != ELFCOMPRESS_ZLIB || compressed.ch_size > kMaxInflatedBytes) return {};
  std::vector<uint8_t> out(compressed.ch_size);
  uLongf out_size = out.size();
  if (uncompress(out.data(), &out_size, bytes.data() + sizeof(compressed),
                 bytes.size() - sizeof(compressed)) != Z_OK ||
      out_size != out.size()) {
    return {};
  }
  return out;
}

}  // namespace pystrobe

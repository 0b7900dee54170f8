#include "daemon/elf/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/auxv.h>
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

// What a compressed section's header (Elf32_Chdr or Elf64_Chdr) says.
struct CompressionHeader {
  uint32_t type;
  uint64_t inflated_size;
  size_t header_size;
};

template <typename Chdr>
std::optional<CompressionHeader> ReadCompressionHeader(absl::Span<const uint8_t> bytes) {
  Chdr header;
  if (bytes.size() < sizeof(header)) return std::nullopt;
  std::memcpy(&header, bytes.data(), sizeof(header));
  return CompressionHeader{header.ch_type, header.ch_size, sizeof(header)};
}

// The vDSO is a few pages; headers saying more are not believed.
constexpr uint64_t kMaxVdsoBytes = uint64_t{1} << 20;
constexpr size_t kMaxKernelNotesBytes = 1 << 16;

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

// The structures of each ELF class, for the templates that parse them.
struct ElfFile::Elf32 {
  using Ehdr = Elf32_Ehdr;
  using Phdr = Elf32_Phdr;
  using Shdr = Elf32_Shdr;
  using Sym = Elf32_Sym;
};
struct ElfFile::Elf64 {
  using Ehdr = Elf64_Ehdr;
  using Phdr = Elf64_Phdr;
  using Shdr = Elf64_Shdr;
  using Sym = Elf64_Sym;
};

absl::StatusOr<ElfFile> ElfFile::Open(const std::string& path, ElfOpenOptions options) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(EI_NIDENT)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an ELF file (too small)"));
  }
  void* map = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("mmap ", path, ": ", std::strerror(errno)));
  }
  ElfFile file(static_cast<const uint8_t*>(map), static_cast<size_t>(st.st_size), true, path);
  file.identity_ = {
      .device = static_cast<uint64_t>(st.st_dev),
      .inode = static_cast<uint64_t>(st.st_ino),
      .size = static_cast<uint64_t>(st.st_size),
      .mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  if (absl::Status status = file.Parse(options); !status.ok()) return status;
  return file;
}

absl::StatusOr<ElfFile> ElfFile::InMemory(absl::Span<const uint8_t> image, std::string name,
                                          ElfOpenOptions options) {
  if (image.size() < EI_NIDENT) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not an ELF file (too small)"));
  }
  ElfFile file(image.data(), image.size(), false, std::move(name));
  if (absl::Status status = file.Parse(options); !status.ok()) return status;
  return file;
}

ElfFile::ElfFile(ElfFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, false)),
      name_(std::move(other.name_)),
      identity_(other.identity_),
      is_64bit_(other.is_64bit_),
      type_(other.type_),
      machine_(other.machine_),
      load_segments_(std::move(other.load_segments_)),
      sections_(std::move(other.sections_)),
      build_id_(std::move(other.build_id_)),
      debuglink_(std::move(other.debuglink_)),
      debuglink_crc_(other.debuglink_crc_) {}

ElfFile& ElfFile::operator=(ElfFile&& other) noexcept {
  if (this != &other) {
    if (mapped_) munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, false);
    name_ = std::move(other.name_);
    identity_ = other.identity_;
    is_64bit_ = other.is_64bit_;
    type_ = other.type_;
    machine_ = other.machine_;
    load_segments_ = std::move(other.load_segments_);
    sections_ = std::move(other.sections_);
    build_id_ = std::move(other.build_id_);
    debuglink_ = std::move(other.debuglink_);
    debuglink_crc_ = other.debuglink_crc_;
  }
  return *this;
}

ElfFile::~ElfFile() {
  if (mapped_) munmap(const_cast<uint8_t*>(data_), size_);
}

absl::Span<const uint8_t> ElfFile::Bytes(uint64_t offset, uint64_t count,
                                         uint64_t item_size) const {
  if (item_size != 0 && count > size_ / item_size) return {};
  const uint64_t length = count * item_size;
  if (!InFile(offset, length)) return {};
  return absl::Span<const uint8_t>(data_ + offset, length);
}

absl::Status ElfFile::Parse(ElfOpenOptions options) {
  if (std::memcmp(data_, ELFMAG, SELFMAG) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": not an ELF file"));
  }
  const uint8_t elf_class = data_[EI_CLASS];
  const bool supported_class =
      elf_class == ELFCLASS64 || (elf_class == ELFCLASS32 && options.allow_32bit);
  if (!supported_class || data_[EI_DATA] != ELFDATA2LSB) {
    return absl::UnimplementedError(
        absl::StrCat(name_, ": only ", options.allow_32bit ? "" : "64-bit ",
                     "little-endian ELF is supported (class ", int{elf_class}, ", data ",
                     int{data_[EI_DATA]}, ")"));
  }
  is_64bit_ = elf_class == ELFCLASS64;
  if (size_ < (is_64bit_ ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr))) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": not an ELF file (too small)"));
  }
  if (is_64bit_) {
    ParseHeaders<Elf64>();
  } else {
    ParseHeaders<Elf32>();
  }
  return absl::OkStatus();
}

// Headers that lie outside the file are not followed: what they would
// describe is simply absent (no segments, no sections).
template <typename Class>
void ElfFile::ParseHeaders() {
  typename Class::Ehdr header;
  std::memcpy(&header, data_, sizeof(header));
  type_ = header.e_type;
  machine_ = header.e_machine;
  auto as_view = [](absl::Span<const uint8_t> bytes) {
    return absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  };
  using Phdr = typename Class::Phdr;
  if (header.e_phentsize == sizeof(Phdr)) {
    absl::Span<const uint8_t> phdrs = Bytes(header.e_phoff, header.e_phnum, sizeof(Phdr));
    for (size_t i = 0; i * sizeof(Phdr) < phdrs.size(); ++i) {
      Phdr ph;
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
  using Shdr = typename Class::Shdr;
  if (header.e_shentsize != sizeof(Shdr)) return;
  absl::Span<const uint8_t> shdrs = Bytes(header.e_shoff, header.e_shnum, sizeof(Shdr));
  std::vector<Shdr> raw(shdrs.size() / sizeof(Shdr));
  if (!raw.empty()) std::memcpy(raw.data(), shdrs.data(), shdrs.size());
  absl::Span<const uint8_t> names;
  if (header.e_shstrndx < raw.size()) {
    const Shdr& strtab = raw[header.e_shstrndx];
    names = Bytes(strtab.sh_offset, strtab.sh_size, 1);
  }
  sections_.reserve(raw.size());
  for (const Shdr& sh : raw) {
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
  // .gnu_debuglink: the name, NUL, padding to 4, the CRC-32.
  absl::string_view debuglink = as_view(Section(".gnu_debuglink"));
  size_t name_end = debuglink.find('\0');
  if (name_end != absl::string_view::npos && name_end > 0 && debuglink.size() >= name_end + 5) {
    debuglink_ = std::string(debuglink.substr(0, name_end));
    std::memcpy(&debuglink_crc_, debuglink.data() + debuglink.size() - 4, 4);
  }
}

absl::Status ElfFile::CheckSymbolTable(size_t index) const {
  const ElfSection& table = sections_[index];
  auto error = [&](absl::string_view what) {
    return absl::DataLossError(
        absl::StrCat(name_, ": symbol table ", table.name, " (section ", index, ") ", what));
  };
  const uint64_t entry_size = is_64bit_ ? sizeof(Elf64_Sym) : sizeof(Elf32_Sym);
  if (table.entry_size != entry_size) {
    return error(absl::StrCat("has entries of ", table.entry_size, " bytes, not ", entry_size));
  }
  if (table.size % entry_size != 0) {
    return error(absl::StrCat("is ", table.size, " bytes, not a whole number of entries"));
  }
  if (!InFile(table.offset, table.size)) {
    return error(absl::StrCat("lies outside the file (offset ", table.offset, ", size ", table.size,
                              ", file size ", size_, ")"));
  }
  if (table.link >= sections_.size() || sections_[table.link].type != SHT_STRTAB) {
    return error(absl::StrCat("links to section ", table.link, ", not a string table"));
  }
  const ElfSection& strings = sections_[table.link];
  if (!InFile(strings.offset, strings.size)) {
    return error(absl::StrCat("links to string table ", strings.name, " (section ", table.link,
                              ") outside the file (offset ", strings.offset, ", size ",
                              strings.size, ", file size ", size_, ")"));
  }
  return absl::OkStatus();
}

template <typename Class>
void ElfFile::VisitSymbols(size_t table, absl::Span<const uint8_t> strings,
                           absl::FunctionRef<void(const ElfSymbolEntry&)> visit) const {
  using Sym = typename Class::Sym;
  const uint8_t* entries = data_ + sections_[table].offset;
  for (uint64_t i = 0, count = sections_[table].size / sizeof(Sym); i < count; ++i) {
    Sym sym;
    std::memcpy(&sym, entries + i * sizeof(sym), sizeof(sym));
    visit({.name = StringAt(strings, sym.st_name),
           .value = sym.st_value,
           .size = sym.st_size,
           .type = static_cast<uint8_t>(sym.st_info & 0xf),
           .binding = static_cast<uint8_t>(sym.st_info >> 4),
           .section = sym.st_shndx,
           .table = static_cast<uint32_t>(table)});
  }
}

void ElfFile::VisitTable(size_t index, absl::FunctionRef<void(const ElfSymbolEntry&)> visit) const {
  const ElfSection& strings = sections_[sections_[index].link];
  absl::Span<const uint8_t> string_table(data_ + strings.offset, strings.size);
  if (is_64bit_) {
    VisitSymbols<Elf64>(index, string_table, visit);
  } else {
    VisitSymbols<Elf32>(index, string_table, visit);
  }
}

absl::Status ElfFile::ForEachSymbol(absl::FunctionRef<void(const ElfSymbolEntry&)> visit) const {
  std::vector<size_t> tables;
  for (uint32_t type : {SHT_SYMTAB, SHT_DYNSYM}) {
    for (size_t i = 0; i < sections_.size(); ++i) {
      if (sections_[i].type != type) continue;
      if (absl::Status status = CheckSymbolTable(i); !status.ok()) return status;
      tables.push_back(i);
    }
  }
  for (size_t i : tables) VisitTable(i, visit);
  return absl::OkStatus();
}

absl::flat_hash_map<std::string, ElfSymbol> ElfFile::FindSymbols(
    absl::Span<const absl::string_view> names) const {
  absl::flat_hash_set<absl::string_view> wanted(names.begin(), names.end());
  absl::flat_hash_map<std::string, ElfSymbol> found;
  auto keep = [&](const ElfSymbolEntry& sym) {
    if (sym.section == SHN_UNDEF || sym.value == 0 || !wanted.contains(sym.name)) return;
    found.try_emplace(std::string(sym.name), ElfSymbol{sym.value, sym.size});
  };
  // A table that cannot be read whole is passed over, the others still
  // read: the symbols looked up here are in one table or the other.
  for (uint32_t type : {SHT_SYMTAB, SHT_DYNSYM}) {
    for (size_t i = 0; i < sections_.size(); ++i) {
      if (sections_[i].type == type && CheckSymbolTable(i).ok()) VisitTable(i, keep);
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
  std::optional<CompressionHeader> header = is_64bit_ ? ReadCompressionHeader<Elf64_Chdr>(bytes)
                                                      : ReadCompressionHeader<Elf32_Chdr>(bytes);
  if (!header) return {};
  const auto [compression, inflated_size, header_size] = *header;
  if (compression != ELFCOMPRESS_ZLIB || inflated_size > kMaxInflatedBytes) return {};
  std::vector<uint8_t> out(inflated_size);
  uLongf out_size = out.size();
  if (uncompress(out.data(), &out_size, bytes.data() + header_size, bytes.size() - header_size) !=
          Z_OK ||
      out_size != out.size()) {
    return {};
  }
  return out;
}

absl::Span<const uint8_t> VdsoImage() {
  const auto* image = reinterpret_cast<const uint8_t*>(getauxval(AT_SYSINFO_EHDR));
  if (image == nullptr) return {};
  // The kernel maps the whole image, whose headers say how far it goes: the
  // section headers come last. Its first page is there whatever it says.
  Elf64_Ehdr header;
  std::memcpy(&header, image, sizeof(header));
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_shentsize != sizeof(Elf64_Shdr) || header.e_phentsize != sizeof(Elf64_Phdr) ||
      header.e_shoff > kMaxVdsoBytes || header.e_phoff > kMaxVdsoBytes) {
    return {};
  }
  uint64_t size = std::max(header.e_shoff + uint64_t{header.e_shnum} * sizeof(Elf64_Shdr),
                           header.e_phoff + uint64_t{header.e_phnum} * sizeof(Elf64_Phdr));
  if (size > kMaxVdsoBytes) return {};
  return absl::Span<const uint8_t>(image, size);
}

std::string ReadKernelBuildId(const std::string& notes_path) {
  const int fd = open(notes_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  // The kernel's notes are a few hundred bytes.
  std::string notes(kMaxKernelNotesBytes, '\0');
  size_t size = 0;
  while (size < notes.size()) {
    ssize_t n = read(fd, notes.data() + size, notes.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size += static_cast<size_t>(n);
  }
  close(fd);
  notes.resize(size);
  return GnuBuildIdInNotes(notes).value_or("");
}

}  // namespace pystrobe

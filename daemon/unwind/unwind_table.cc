#include "daemon/unwind/unwind_table.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "daemon/unwind/dwarf_cfi.h"

namespace pystrobe {
namespace {

// A file mapped read-only for as long as this lives.
class MappedFile {
 public:
  static absl::StatusOr<MappedFile> Open(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::NotFoundError(absl::StrCat("open ", path, ": ", strerror(errno)));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat(path, ": not an ELF file"));
    }
    void* data = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED) {
      return absl::InternalError(absl::StrCat("mmap ", path, ": ", strerror(errno)));
    }
    return MappedFile(static_cast<const uint8_t*>(data), st.st_size);
  }
  MappedFile(MappedFile&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  MappedFile& operator=(MappedFile&&) = delete;
  ~MappedFile() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
  }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  const uint8_t* data_;
  size_t size_;
};

// The parts of an ELF file this library reads.
struct ElfView {
  struct Section {
    std::string name;
    uint32_t type = 0;
    uint64_t flags = 0;
    uint64_t address = 0;
    uint64_t offset = 0;
    uint64_t size = 0;
  };
  std::vector<Section> sections;
  std::vector<ElfLoadRange> load_segments;
  std::string build_id;
  std::string debuglink;

  const Section* Find(absl::string_view name) const {
    for (const Section& s : sections) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }
};

bool InBounds(const MappedFile& file, uint64_t offset, uint64_t size) {
  return offset <= file.size() && size <= file.size() - offset;
}

std::string Hex(absl::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) absl::StrAppendFormat(&out, "%02x", c);
  return out;
}

// The build id in a run of notes (4-byte aligned, as every x86-64 note
// section with one is).
std::string BuildIdInNotes(const uint8_t* p, size_t size) {
  size_t at = 0;
  while (at + sizeof(Elf64_Nhdr) <= size) {
    Elf64_Nhdr note;
    std::memcpy(&note, p + at, sizeof(note));
    size_t name_at = at + sizeof(note);
    size_t desc_at = name_at + ((note.n_namesz + 3) & ~3u);
    size_t next = desc_at + ((note.n_descsz + 3) & ~3u);
    if (next > size || next <= at) break;
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 &&
        std::memcmp(p + name_at, "GNU", 4) == 0) {
      return Hex(absl::string_view(reinterpret_cast<const char*>(p + desc_at), note.n_descsz));
    }
    at = next;
  }
  return "";
}

absl::StatusOr<ElfView> ParseElf(const MappedFile& file, const std::string& path) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, file.data(), sizeof(eh));
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an x86-64 ELF64 file"));
  }
  ElfView view;
  if (eh.e_phentsize == sizeof(Elf64_Phdr) &&
      InBounds(file, eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr))) {
    for (int i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      std::memcpy(&ph, file.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
      if (ph.p_type == PT_LOAD) {
        view.load_segments.push_back(
            {ph.p_vaddr, ph.p_offset, ph.p_filesz, (ph.p_flags & PF_X) != 0});
      } else if (ph.p_type == PT_NOTE && view.build_id.empty() &&
                 InBounds(file, ph.p_offset, ph.p_filesz)) {
        view.build_id = BuildIdInNotes(file.data() + ph.p_offset, ph.p_filesz);
      }
    }
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !InBounds(file, eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr)) ||
      eh.e_shstrndx >= eh.e_shnum) {
    return view;  // no sections: nothing to unwind with
  }
  std::vector<Elf64_Shdr> headers(eh.e_shnum);
  std::memcpy(headers.data(), file.data() + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  const Elf64_Shdr& names = headers[eh.e_shstrndx];
  if (!InBounds(file, names.sh_offset, names.sh_size)) return view;
  for (const Elf64_Shdr& sh : headers) {
    ElfView::Section section;
    if (sh.sh_name < names.sh_size) {
      const char* name = reinterpret_cast<const char*>(file.data() + names.sh_offset + sh.sh_name);
      section.name.assign(name, strnlen(name, names.sh_size - sh.sh_name));
    }
    section.type = sh.sh_type;
    section.flags = sh.sh_flags;
    section.address = sh.sh_addr;
    section.offset = sh.sh_offset;
    section.size = sh.sh_size;
    view.sections.push_back(std::move(section));
  }
  if (view.build_id.empty()) {
    if (const ElfView::Section* s = view.Find(".note.gnu.build-id");
        s && InBounds(file, s->offset, s->size)) {
      view.build_id = BuildIdInNotes(file.data() + s->offset, s->size);
    }
  }
  if (const ElfView::Section* s = view.Find(".gnu_debuglink");
      s && s->type != SHT_NOBITS && InBounds(file, s->offset, s->size)) {
    const char* name = reinterpret_cast<const char*>(file.data() + s->offset);
    view.debuglink.assign(name, strnlen(name, s->size));
  }
  return view;
}

// A section's bytes, inflated when SHF_COMPRESSED (debug files often are).
// Empty when absent, NOBITS or unreadable.
std::vector<uint8_t> SectionBytes(const MappedFile& file, const ElfView::Section* section) {
  if (!section || section->type == SHT_NOBITS || !InBounds(file, section->offset, section->size))
    return {};
  const uint8_t* p = file.data() + section->offset;
  if (!(section->flags & SHF_COMPRESSED)) return std::vector<uint8_t>(p, p + section->size);
  Elf64_Chdr ch;
  if (section->size < sizeof(ch)) return {};
  std::memcpy(&ch, p, sizeof(ch));
  if (ch.ch_type != ELFCOMPRESS_ZLIB || ch.ch_size > (uint64_t{1} << 31)) return {};
  std::vector<uint8_t> out(ch.ch_size);
  uLongf out_size = out.size();
  if (uncompress(out.data(), &out_size, p + sizeof(ch), section->size - sizeof(ch)) != Z_OK ||
      out_size != out.size()) {
    return {};
  }
  return out;
}

absl::Status ReadSection(const MappedFile& file, const ElfView& view, absl::string_view name,
                         bool is_eh_frame, std::vector<FdeRows>& fdes, UnwindTable& table,
                         const std::string& label) {
  const ElfView::Section* section = view.Find(name);
  std::vector<uint8_t> bytes = SectionBytes(file, section);
  if (bytes.empty()) return absl::OkStatus();
  CfiStats stats;
  size_t before = fdes.size();
  absl::Status status = ReadCfi(
      CfiSection{bytes, section->address, is_eh_frame},
      [&](FdeRows&& fde) { fdes.push_back(std::move(fde)); }, &stats);
  if (!status.ok()) return status;
  table.fdes += stats.fdes;
  table.fdes_skipped += stats.fdes_skipped;
  if (fdes.size() > before) table.sources.push_back(absl::StrCat(label, name));
  return absl::OkStatus();
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The separate debug file of `path`, by build id, then by debuglink.
std::optional<std::string> FindDebugFile(const std::string& path, const ElfView& view,
                                         const UnwindTableOptions& options) {
  if (view.build_id.size() > 2) {
    for (const std::string& dir : options.debug_directories) {
      std::string candidate = absl::StrCat(dir, "/.build-id/", view.build_id.substr(0, 2), "/",
                                           view.build_id.substr(2), ".debug");
      if (FileExists(candidate)) return candidate;
    }
  }
  if (!view.debuglink.empty()) {
    std::string dir = path.substr(0, path.rfind('/') + 1);
    std::vector<std::string> candidates = {dir + view.debuglink, dir + ".debug/" + view.debuglink};
    for (const std::string& debug_dir : options.debug_directories) {
      candidates.push_back(absl::StrCat(debug_dir, dir, view.debuglink));
    }
    for (const std::string& candidate : candidates) {
      if (candidate != path && FileExists(candidate)) return candidate;
    }
  }
  return std::nullopt;
}

pystrobe_unwind_row InvalidRow(uint64_t address) {
  pystrobe_unwind_row row{};
  row.addr = static_cast<uint32_t>(address);
  row.cfa_rule = PYSTROBE_UNWIND_CFA_INVALID;
  return row;
}

bool SameRule(const pystrobe_unwind_row& a, const pystrobe_unwind_row& b) {
  return a.cfa_rule == b.cfa_rule && a.cfa_offset == b.cfa_offset && a.rbp_rule == b.rbp_rule &&
         a.rbp_offset == b.rbp_offset;
}

// Lays the FDEs (eh_frame's first, then debug_frame's) out as one sorted
// table: an FDE overlapping one already placed is left out.
void LayOut(std::vector<FdeRows>& fdes, size_t eh_frame_fdes, UnwindTable& table) {
  std::vector<size_t> order(fdes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (fdes[a].start != fdes[b].start) return fdes[a].start < fdes[b].start;
    return (a < eh_frame_fdes) > (b < eh_frame_fdes);
  });
  uint64_t covered_to = 0;
  auto push = [&](const pystrobe_unwind_row& row) {
    if (!table.rows.empty() && table.rows.back().addr == row.addr) table.rows.pop_back();
    if (!table.rows.empty() && SameRule(table.rows.back(), row)) return;
    table.rows.push_back(row);
  };
  for (size_t index : order) {
    const FdeRows& fde = fdes[index];
    if (fde.rows.empty() || fde.start < covered_to) continue;
    if (!table.rows.empty() && fde.start > covered_to) push(InvalidRow(covered_to));
    for (const pystrobe_unwind_row& row : fde.rows) push(row);
    covered_to = fde.end;
  }
  if (!table.rows.empty()) push(InvalidRow(covered_to));
}

void BuildPageIndex(UnwindTable& table) {
  table.pages.clear();
  if (table.rows.empty()) return;
  uint32_t first = table.rows.front().addr >> PYSTROBE_UNWIND_PAGE_SHIFT;
  uint32_t last = table.rows.back().addr >> PYSTROBE_UNWIND_PAGE_SHIFT;
  table.first_page = first;
  table.pages.reserve(last - first + 2);
  size_t row = 0;
  for (uint64_t page = first; page <= uint64_t{last} + 1; ++page) {
    uint64_t page_start = page << PYSTROBE_UNWIND_PAGE_SHIFT;
    while (row + 1 < table.rows.size() && table.rows[row + 1].addr <= page_start) ++row;
    table.pages.push_back(static_cast<uint32_t>(row));
  }
}

}  // namespace

const pystrobe_unwind_row* UnwindTable::Find(uint64_t address) const {
  if (rows.empty() || address < rows.front().addr || address > UINT32_MAX) return nullptr;
  uint64_t page = (address >> PYSTROBE_UNWIND_PAGE_SHIFT) - first_page;
  if (page + 1 >= pages.size()) return nullptr;
  // The answer lies in [lo, hi]: rows[lo].addr <= address by construction.
  uint32_t lo = pages[page], hi = pages[page + 1];
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo + 1) / 2;
    if (rows[mid].addr <= address) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return &rows[lo];
}

absl::StatusOr<UnwindTable> BuildUnwindTable(const std::string& path,
                                             const UnwindTableOptions& options) {
  absl::Time started = absl::Now();
  absl::StatusOr<MappedFile> file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<ElfView> view = ParseElf(*file, path);
  if (!view.ok()) return view.status();

  UnwindTable table;
  table.build_id = view->build_id;
  table.load_segments = view->load_segments;
  std::vector<FdeRows> fdes;
  absl::Status status = ReadSection(*file, *view, ".eh_frame", true, fdes, table, "");
  if (!status.ok()) return absl::DataLossError(absl::StrCat(path, ": ", status.message()));
  size_t eh_frame_fdes = fdes.size();
  if (options.use_debug_frame) {
    status = ReadSection(*file, *view, ".debug_frame", false, fdes, table, "");
    if (!status.ok()) return absl::DataLossError(absl::StrCat(path, ": ", status.message()));
    if (fdes.size() == eh_frame_fdes) {
      if (std::optional<std::string> debug_path = FindDebugFile(path, *view, options)) {
        absl::StatusOr<MappedFile> debug_file = MappedFile::Open(*debug_path);
        absl::StatusOr<ElfView> debug_view =
            debug_file.ok() ? ParseElf(*debug_file, *debug_path) : debug_file.status();
        // A debug file of another build would unwind with wrong rules.
        if (debug_view.ok() && (debug_view->build_id.empty() || table.build_id.empty() ||
                                debug_view->build_id == table.build_id)) {
          ReadSection(*debug_file, *debug_view, ".debug_frame", false, fdes, table,
                      *debug_path + ": ")
              .IgnoreError();
        }
      }
    }
  }
  if (fdes.empty()) {
    return absl::NotFoundError(absl::StrCat(path, ": no call frame information"));
  }
  LayOut(fdes, eh_frame_fdes, table);
  BuildPageIndex(table);
  table.build_time = absl::Now() - started;
  return table;
}

std::optional<uint64_t> LoadBias(const std::vector<ElfLoadRange>& segments, uint64_t start,
                                 uint64_t file_offset) {
  for (const ElfLoadRange& segment : segments) {
    // Mappings start on a page; the segment's first page may begin before
    // p_offset.
    uint64_t page_offset = segment.offset & ~uint64_t{0xfff};
    if (file_offset >= page_offset && file_offset < segment.offset + segment.file_size) {
      return start - file_offset + segment.offset - segment.vaddr;
    }
  }
  return std::nullopt;
}

}  // namespace pystrobe

#include "daemon/symbolizer/elf_identity.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/elf/elf_file.h"

namespace pystrobe {
namespace {

// Bounds on what a damaged or hostile file can make us read: real files have
// a few dozen program headers and notes of a few hundred bytes.
constexpr size_t kMaxProgramHeaders = 4096;
constexpr uint64_t kMaxNoteSegmentBytes = 1 << 16;

// Reads `size` bytes at `offset` into `out`; false when they are not there.
using ReadAt = std::function<bool(uint64_t offset, size_t size, void* out)>;

// ELF32 and ELF64 differ in field widths and order; this is what we use of a
// program header, whichever class the file is.
struct ProgramHeader {
  uint32_t type;
  uint32_t flags;
  uint64_t offset;
  uint64_t vaddr;
  uint64_t filesz;
  uint64_t memsz;
  uint64_t align;
};

template <typename Ehdr, typename Phdr>
absl::StatusOr<std::vector<ProgramHeader>> ReadProgramHeaders(const ReadAt& read_at) {
  Ehdr header;
  if (!read_at(0, sizeof(header), &header)) return absl::InvalidArgumentError("short ELF header");
  // PN_XNUM moves the count to section 0; no file we symbolize needs that many.
  if (header.e_phentsize != sizeof(Phdr) || header.e_phnum >= PN_XNUM ||
      header.e_phnum > kMaxProgramHeaders) {
    return absl::InvalidArgumentError("unexpected ELF program header table");
  }
  std::vector<Phdr> raw(header.e_phnum);
  if (!raw.empty() && !read_at(header.e_phoff, raw.size() * sizeof(Phdr), raw.data())) {
    return absl::InvalidArgumentError("short ELF program header table");
  }
  std::vector<ProgramHeader> headers;
  headers.reserve(raw.size());
  for (const Phdr& p : raw) {
    headers.push_back(
        {p.p_type, p.p_flags, p.p_offset, p.p_vaddr, p.p_filesz, p.p_memsz, p.p_align});
  }
  return headers;
}

absl::StatusOr<ElfIdentity> ReadIdentity(const ReadAt& read_at) {
  unsigned char ident[EI_NIDENT];
  if (!read_at(0, sizeof(ident), ident) || memcmp(ident, ELFMAG, SELFMAG) != 0) {
    return absl::InvalidArgumentError("not an ELF file");
  }
  // Only files of this machine's byte order: those are the ones its
  // processes map.
  constexpr unsigned char kHostData =
      __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
  if (ident[EI_DATA] != kHostData) return absl::InvalidArgumentError("foreign ELF byte order");
  absl::StatusOr<std::vector<ProgramHeader>> headers =
      ident[EI_CLASS] == ELFCLASS64   ? ReadProgramHeaders<Elf64_Ehdr, Elf64_Phdr>(read_at)
      : ident[EI_CLASS] == ELFCLASS32 ? ReadProgramHeaders<Elf32_Ehdr, Elf32_Phdr>(read_at)
                                      : absl::InvalidArgumentError("unknown ELF class");
  if (!headers.ok()) return headers.status();

  ElfIdentity identity;
  for (const ProgramHeader& header : *headers) {
    if (header.type == PT_LOAD && (header.flags & PF_X) != 0) {
      identity.code_segments.push_back({header.vaddr, header.memsz, header.offset});
    }
    if (header.type != PT_NOTE || !identity.build_id.empty() || header.filesz == 0 ||
        header.filesz > kMaxNoteSegmentBytes) {
      continue;
    }
    std::string notes(header.filesz, '\0');
    if (!read_at(header.offset, notes.size(), notes.data())) continue;
    if (std::optional<std::string> build_id = GnuBuildIdInNotes(notes, header.align == 8 ? 8 : 4)) {
      identity.build_id = *std::move(build_id);
    }
  }
  return identity;
}

}  // namespace

absl::StatusOr<ElfIdentity> ReadElfIdentity(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  absl::StatusOr<ElfIdentity> identity =
      ReadIdentity([fd](uint64_t offset, size_t size, void* out) {
        auto* bytes = static_cast<char*>(out);
        for (size_t done = 0; done < size;) {
          ssize_t n = pread(fd, bytes + done, size - done, static_cast<off_t>(offset + done));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) return false;
          done += static_cast<size_t>(n);
        }
        return true;
      });
  close(fd);
  if (!identity.ok()) {
    return absl::Status(identity.status().code(),
                        absl::StrCat(path, ": ", identity.status().message()));
  }
  return identity;
}

absl::StatusOr<ElfIdentity> ReadElfIdentityInMemory(const void* image, size_t size) {
  return ReadIdentity([image, size](uint64_t offset, size_t n, void* out) {
    if (offset > size || n > size - offset) return false;
    memcpy(out, static_cast<const char*>(image) + offset, n);
    return true;
  });
}

}  // namespace pystrobe

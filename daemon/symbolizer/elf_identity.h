// What identifies an ELF file to a profile reader: its GNU build id, and its
// executable segments, which turn a file offset into the ELF virtual address
// that symbol tables, addr2line and pprof use. Read with a few preads, never
// mapping the file (daemon/elf/elf_file.h reads whole files, and parses the
// notes for both).
#ifndef PYSTROBE_DAEMON_SYMBOLIZER_ELF_IDENTITY_H_
#define PYSTROBE_DAEMON_SYMBOLIZER_ELF_IDENTITY_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/symbolizer/native_symbolizer.h"

namespace pystrobe {

struct ElfIdentity {
  // The NT_GNU_BUILD_ID note of a PT_NOTE segment, in lowercase hex as
  // `readelf -n` and `file` print it; empty when the file has none.
  std::string build_id;
  // PT_LOAD segments with PF_X, in program header order.
  std::vector<CodeSegment> code_segments;
};

// Reads the ELF header, program headers and notes of the file at path (a few
// small preads, not the whole file). Fails when the file cannot be read or is
// not an ELF file of this machine's byte order.
absl::StatusOr<ElfIdentity> ReadElfIdentity(const std::string& path);

// The same, of an ELF image mapped whole in this process (the vDSO).
absl::StatusOr<ElfIdentity> ReadElfIdentityInMemory(const void* image, size_t size);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_SYMBOLIZER_ELF_IDENTITY_H_

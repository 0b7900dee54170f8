// The one ELF reader against readelf's view of real files on this machine,
// and against files it must refuse or read only within their bounds.
#include "daemon/elf/elf_file.h"

#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/symbolizer/elf_tools.h"

namespace pystrobe {
namespace {

using ::testing::Optional;

// A file in the test's temporary directory, removed with it.
std::string WriteFile(const std::string& name, const std::string& bytes) {
  std::string path = absl::StrCat(testing::TempDir(), "/", name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

TEST(ElfFileTest, BuildIdAndExecutableSegmentsAgreeWithReadelf) {
  for (const std::string& path :
       {std::string("/usr/bin/python3.11"), RealPath("/lib/x86_64-linux-gnu/libc.so.6"),
        RealPath("/proc/self/exe")}) {
    if (access(path.c_str(), R_OK) != 0) continue;
    absl::StatusOr<ElfFile> file = ElfFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_EQ(file->build_id(), ReadelfBuildId(path)) << path;
    EXPECT_EQ(file->machine(), EM_X86_64);
    std::vector<CodeSegment> code;
    for (const ElfLoadSegment& segment : file->load_segments()) {
      if (segment.executable) code.push_back({segment.vaddr, segment.mem_size, segment.offset});
    }
    EXPECT_EQ(code, ReadelfCodeSegments(path)) << path;
  }
}

// The FDE starts `readelf --debug-dump=frames` lists, sorted.
std::vector<uint64_t> ReadelfFdeStarts(const std::string& path) {
  std::istringstream lines(CommandOutput("readelf --debug-dump=frames '" + path + "'"));
  std::vector<uint64_t> starts;
  for (std::string line; std::getline(lines, line);) {
    size_t pc = line.find(" FDE cie=");
    if (pc == std::string::npos || (pc = line.find("pc=", pc)) == std::string::npos) continue;
    starts.push_back(std::stoull(line.substr(pc + 3), nullptr, 16));
  }
  std::sort(starts.begin(), starts.end());
  return starts;
}

TEST(ElfFileTest, FunctionStartsAreTheFdesReadelfLists) {
  for (const std::string& path :
       {std::string("/usr/bin/python3.11"), RealPath("/lib/x86_64-linux-gnu/libc.so.6")}) {
    if (access(path.c_str(), R_OK) != 0) continue;
    absl::StatusOr<ElfFile> file = ElfFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    std::vector<uint64_t> starts = file->FunctionStarts();
    EXPECT_GT(starts.size(), 1000u) << path;
    EXPECT_EQ(starts, ReadelfFdeStarts(path)) << path;
  }
}

TEST(ElfFileTest, DebuglinkAndSectionsOfAStrippedDebianBinary) {
  const std::string path = "/usr/bin/python3.11";
  absl::StatusOr<ElfFile> file = ElfFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  // Debian strips into a debug file named in .gnu_debuglink.
  std::string readelf = CommandOutput("readelf -p .gnu_debuglink " + path);
  if (readelf.find(".debug") != std::string::npos) {
    EXPECT_THAT(file->debuglink(), testing::EndsWith(".debug"));
    EXPECT_NE(readelf.find(file->debuglink()), std::string::npos) << readelf;
  }
  const ElfSection* eh_frame = file->FindSection(".eh_frame");
  ASSERT_NE(eh_frame, nullptr);
  // readelf -SW: "[NN] .eh_frame PROGBITS <address> <offset> <size> ..."
  std::istringstream row(CommandOutput("readelf -SW " + path + " | grep ' \\.eh_frame '"));
  std::vector<std::string> fields{std::istream_iterator<std::string>(row),
                                  std::istream_iterator<std::string>()};
  auto name = std::find(fields.begin(), fields.end(), ".eh_frame");
  ASSERT_LE(name + 5, fields.end()) << row.str();
  EXPECT_EQ(eh_frame->address, std::stoull(name[2], nullptr, 16)) << row.str();
  EXPECT_EQ(eh_frame->offset, std::stoull(name[3], nullptr, 16)) << row.str();
  EXPECT_EQ(eh_frame->size, std::stoull(name[4], nullptr, 16)) << row.str();
  EXPECT_EQ(file->SectionBytes(eh_frame).size(), eh_frame->size);
  EXPECT_EQ(file->Section(".eh_frame").size(), eh_frame->size);
  EXPECT_EQ(file->FindSection(".no_such_section"), nullptr);
  EXPECT_TRUE(file->SectionBytes(nullptr).empty());
}

TEST(ElfFileTest, RefusesWhatIsNotELF64LittleEndianAndSaysWhich) {
  EXPECT_EQ(ElfFile::Open("/nonexistent/pystrobe").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<ElfFile> small = ElfFile::Open(WriteFile("small",
                                                          "\x7f"
                                                          "ELF"));
  EXPECT_THAT(small.status().message(), testing::HasSubstr("too small"));
  absl::StatusOr<ElfFile> text = ElfFile::Open(WriteFile("text", std::string(128, 'x')));
  EXPECT_THAT(text.status().message(), testing::HasSubstr("not an ELF file"));
  std::string elf32(128, '\0');
  elf32.replace(0, 4,
                "\x7f"
                "ELF");
  elf32[EI_CLASS] = ELFCLASS32;
  elf32[EI_DATA] = ELFDATA2LSB;
  EXPECT_EQ(ElfFile::Open(WriteFile("elf32", elf32)).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(ElfFileTest, HeadersPointingPastTheEndAreNotFollowed) {
  // An ELF header whose program and section headers lie beyond the file.
  Elf64_Ehdr header = {};
  std::memcpy(header.e_ident, ELFMAG, SELFMAG);
  header.e_ident[EI_CLASS] = ELFCLASS64;
  header.e_ident[EI_DATA] = ELFDATA2LSB;
  header.e_machine = EM_X86_64;
  header.e_phoff = 1 << 20;
  header.e_phnum = 4;
  header.e_phentsize = sizeof(Elf64_Phdr);
  header.e_shoff = 0xffffffffffff0000;
  header.e_shnum = 0xffff;
  header.e_shentsize = sizeof(Elf64_Shdr);
  std::string bytes(reinterpret_cast<const char*>(&header), sizeof(header));
  absl::StatusOr<ElfFile> file = ElfFile::Open(WriteFile("truncated", bytes));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->load_segments().empty());
  EXPECT_EQ(file->FindSection(".text"), nullptr);
  EXPECT_EQ(file->build_id(), "");
  EXPECT_EQ(file->debuglink(), "");
}

// Notes as a PT_NOTE segment holds them: header, name, descriptor, each
// padded to `align`.
void AppendNote(std::string& notes, uint32_t type, const std::string& name, const std::string& desc,
                size_t align) {
  Elf64_Nhdr header = {static_cast<Elf64_Word>(name.size()), static_cast<Elf64_Word>(desc.size()),
                       type};
  notes.append(reinterpret_cast<const char*>(&header), sizeof(header));
  notes.append(name);
  notes.append((align - name.size() % align) % align, '\0');
  notes.append(desc);
  notes.append((align - desc.size() % align) % align, '\0');
}

TEST(GnuBuildIdInNotesTest, FindsTheBuildIdAfterOtherNotesAtEitherAlignment) {
  const std::string gnu("GNU\0", 4);
  for (size_t align : {4, 8}) {
    std::string notes;
    AppendNote(notes, NT_GNU_ABI_TAG, gnu, std::string(16, '\x01'), align);
    AppendNote(notes, NT_GNU_BUILD_ID, std::string("Xen\0", 4), "\xaa\xbb", align);
    AppendNote(notes, NT_GNU_BUILD_ID, gnu, "\x01\x23\xab\xcd\xef", align);
    EXPECT_THAT(GnuBuildIdInNotes(notes, align), Optional(std::string("0123abcdef")))
        << "align " << align;
  }
}

TEST(GnuBuildIdInNotesTest, TruncatedOrAbsentNotesGiveNothing) {
  const std::string gnu("GNU\0", 4);
  std::string notes;
  AppendNote(notes, NT_GNU_BUILD_ID, gnu, std::string(20, '\x5a'), 4);
  EXPECT_EQ(GnuBuildIdInNotes(notes.substr(0, notes.size() - 1)), std::nullopt);
  EXPECT_EQ(GnuBuildIdInNotes(notes.substr(0, 5)), std::nullopt);
  EXPECT_EQ(GnuBuildIdInNotes(""), std::nullopt);
  std::string other;
  AppendNote(other, NT_GNU_ABI_TAG, gnu, std::string(16, '\0'), 4);
  EXPECT_EQ(GnuBuildIdInNotes(other), std::nullopt);
  // A name size that points past the end is not followed.
  Elf64_Nhdr huge = {0xfffffff0u, 20, NT_GNU_BUILD_ID};
  EXPECT_EQ(GnuBuildIdInNotes(std::string(reinterpret_cast<const char*>(&huge), sizeof(huge)) +
                              std::string(64, 'x')),
            std::nullopt);
}

}  // namespace
}  // namespace pystrobe

// The one ELF reader against readelf's view of real files on this machine
// (headers, sections, every symbol), and against files it must refuse or
// read only within their bounds, of either class.
#include "daemon/elf/elf_file.h"

#include <elf.h>
#include <sys/auxv.h>
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
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/elf/debug_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/symbolizer/elf_tools.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;
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

// One symbol as readelf -sW prints it: table, name, value, size, type.
using SymbolRow = std::tuple<std::string, std::string, uint64_t, uint64_t, std::string>;

std::string TypeName(uint8_t type) {
  switch (type) {
    case STT_NOTYPE:
      return "NOTYPE";
    case STT_OBJECT:
      return "OBJECT";
    case STT_FUNC:
      return "FUNC";
    case STT_SECTION:
      return "SECTION";
    case STT_FILE:
      return "FILE";
    case STT_COMMON:
      return "COMMON";
    case STT_TLS:
      return "TLS";
    case STT_GNU_IFUNC:
      return "IFUNC";
    default:
      return absl::StrCat("type ", type);
  }
}

// `readelf -sW` of `path`: every row of .symtab and .dynsym, the version
// readelf appends to .dynsym names ("memcpy@GLIBC_2.14 (3)") taken off.
std::vector<SymbolRow> ReadelfSymbols(const std::string& path) {
  std::vector<SymbolRow> rows;
  std::string table;
  for (absl::string_view line : absl::StrSplit(CommandOutput("readelf -sW '" + path + "'"), '\n')) {
    if (absl::ConsumePrefix(&line, "Symbol table '")) {
      table = std::string(line.substr(0, line.find('\'')));
      continue;
    }
    // Num: Value Size Type Bind Vis Ndx [Name]
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t value, size;
    if (fields.size() < 7 || !absl::EndsWith(fields[0], ":") ||
        !absl::SimpleHexAtoi(fields[1], &value)) {
      continue;
    }
    if (!absl::SimpleAtoi(fields[2], &size) && !absl::SimpleHexAtoi(fields[2], &size)) continue;
    std::string name = fields.size() > 7 ? std::string(fields[7]) : "";
    if (table == ".dynsym") name = name.substr(0, name.find('@'));
    rows.emplace_back(table, name, value, size, std::string(fields[3]));
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<SymbolRow> OurSymbols(const ElfFile& file) {
  std::vector<SymbolRow> rows;
  absl::Status status = file.ForEachSymbol([&](const ElfSymbolEntry& symbol) {
    rows.emplace_back(file.sections().at(symbol.table).name, std::string(symbol.name), symbol.value,
                      symbol.size, TypeName(symbol.type));
  });
  EXPECT_TRUE(status.ok()) << status;
  std::sort(rows.begin(), rows.end());
  return rows;
}

TEST(ElfFileTest, EverySymbolIsTheOneReadelfLists) {
  // The separate debug file of libc, when libc6-dbg is installed: glibc's
  // whole .symtab.
  std::vector<std::string> paths = {RealPath("/lib/x86_64-linux-gnu/libc.so.6"),
                                    RealPath("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"),
                                    "/usr/bin/python3.11", RealPath("/proc/self/exe")};
  if (absl::StatusOr<ElfFile> libc = ElfFile::Open(paths[0]); libc.ok()) {
    if (std::optional<std::string> debug = FindDebugFile(paths[0], *libc)) paths.push_back(*debug);
  }
  for (const std::string& path : paths) {
    if (access(path.c_str(), R_OK) != 0) continue;
    SCOPED_TRACE(path);
    absl::StatusOr<ElfFile> file = ElfFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    std::vector<SymbolRow> expected = ReadelfSymbols(path);
    ASSERT_GT(expected.size(), 100u);
    std::vector<SymbolRow> ours = OurSymbols(*file);
    EXPECT_EQ(ours.size(), expected.size());
    std::vector<SymbolRow> only_ours, only_readelf;
    std::set_difference(ours.begin(), ours.end(), expected.begin(), expected.end(),
                        std::back_inserter(only_ours));
    std::set_difference(expected.begin(), expected.end(), ours.begin(), ours.end(),
                        std::back_inserter(only_readelf));
    EXPECT_THAT(only_ours, testing::IsEmpty());
    EXPECT_THAT(only_readelf, testing::IsEmpty());
  }
}

TEST(ElfFileTest, HeaderTypeAndMachineOfRealFiles) {
  absl::StatusOr<ElfFile> libc = ElfFile::Open(RealPath("/lib/x86_64-linux-gnu/libc.so.6"));
  ASSERT_TRUE(libc.ok()) << libc.status();
  EXPECT_EQ(libc->type(), ET_DYN);
  EXPECT_EQ(libc->machine(), EM_X86_64);
  EXPECT_TRUE(libc->is_64bit());
  // Debian's python3.11 is not position-independent.
  absl::StatusOr<ElfFile> python = ElfFile::Open("/usr/bin/python3.11");
  ASSERT_TRUE(python.ok()) << python.status();
  EXPECT_EQ(python->type(), ET_EXEC);
  EXPECT_EQ(python->name(), "/usr/bin/python3.11");
}

// A small ELF file of either class as a linker would lay it out: the
// header, .strtab, .symtab, .shstrtab, then the section headers.
struct Symbol {
  std::string name;
  uint64_t value;
  uint64_t size;
  uint8_t type;
};

template <typename Ehdr, typename Shdr, typename Sym>
std::string SmallElf(unsigned char elf_class, const std::vector<Symbol>& symbols,
                     void (*tamper)(std::vector<Shdr>&) = nullptr) {
  std::string strtab(1, '\0');
  std::string symtab(sizeof(Sym), '\0');  // The null entry.
  for (const Symbol& symbol : symbols) {
    Sym sym = {};
    sym.st_name = static_cast<uint32_t>(strtab.size());
    sym.st_value = symbol.value;
    sym.st_size = symbol.size;
    sym.st_info = static_cast<unsigned char>((STB_GLOBAL << 4) | symbol.type);
    sym.st_shndx = 1;
    strtab += symbol.name + std::string(1, '\0');
    symtab.append(reinterpret_cast<const char*>(&sym), sizeof(sym));
  }
  const std::string shstrtab("\0.strtab\0.symtab\0.shstrtab\0", 27);
  std::vector<Shdr> sections(4, Shdr{});
  size_t offset = sizeof(Ehdr);
  sections[1].sh_name = 1;
  sections[1].sh_type = SHT_STRTAB;
  sections[1].sh_offset = offset;
  sections[1].sh_size = strtab.size();
  offset += strtab.size();
  sections[2].sh_name = 9;
  sections[2].sh_type = SHT_SYMTAB;
  sections[2].sh_offset = offset;
  sections[2].sh_size = symtab.size();
  sections[2].sh_link = 1;
  sections[2].sh_entsize = sizeof(Sym);
  offset += symtab.size();
  sections[3].sh_name = 17;
  sections[3].sh_type = SHT_STRTAB;
  sections[3].sh_offset = offset;
  sections[3].sh_size = shstrtab.size();
  offset += shstrtab.size();
  if (tamper != nullptr) tamper(sections);
  Ehdr header = {};
  std::memcpy(header.e_ident, ELFMAG, SELFMAG);
  header.e_ident[EI_CLASS] = elf_class;
  header.e_ident[EI_DATA] = ELFDATA2LSB;
  header.e_ident[EI_VERSION] = EV_CURRENT;
  header.e_type = ET_DYN;
  header.e_machine = elf_class == ELFCLASS64 ? EM_X86_64 : EM_386;
  header.e_shoff = offset;
  header.e_shentsize = sizeof(Shdr);
  header.e_shnum = sections.size();
  header.e_shstrndx = 3;
  header.e_ehsize = sizeof(Ehdr);
  std::string bytes(reinterpret_cast<const char*>(&header), sizeof(header));
  bytes += strtab + symtab + shstrtab;
  bytes.append(reinterpret_cast<const char*>(sections.data()), sections.size() * sizeof(Shdr));
  return bytes;
}

const std::vector<Symbol> kSymbols = {{"main", 0x1000, 0x40, STT_FUNC},
                                      {"table", 0x4000, 16, STT_OBJECT},
                                      {"memcpy", 0x1100, 0x20, STT_GNU_IFUNC}};

std::vector<Symbol> SymbolsOf(const ElfFile& file) {
  std::vector<Symbol> symbols;
  absl::Status status = file.ForEachSymbol([&](const ElfSymbolEntry& symbol) {
    if (symbol.name.empty()) return;
    EXPECT_EQ(symbol.binding, STB_GLOBAL);
    EXPECT_EQ(symbol.section, 1);
    symbols.push_back({std::string(symbol.name), symbol.value, symbol.size, symbol.type});
  });
  EXPECT_TRUE(status.ok()) << status;
  return symbols;
}

MATCHER_P(IsSymbols, expected, "") {
  if (arg.size() != expected.size()) return false;
  for (size_t i = 0; i < arg.size(); ++i) {
    if (arg[i].name != expected[i].name || arg[i].value != expected[i].value ||
        arg[i].size != expected[i].size || arg[i].type != expected[i].type) {
      return false;
    }
  }
  return true;
}

TEST(ElfFileTest, SymbolsOfBothClassesWhenElf32IsAllowed) {
  std::string path64 =
      WriteFile("small64", SmallElf<Elf64_Ehdr, Elf64_Shdr, Elf64_Sym>(ELFCLASS64, kSymbols));
  absl::StatusOr<ElfFile> file64 = ElfFile::Open(path64);
  ASSERT_TRUE(file64.ok()) << file64.status();
  EXPECT_THAT(SymbolsOf(*file64), IsSymbols(kSymbols));
  EXPECT_EQ(file64->type(), ET_DYN);
  EXPECT_EQ(file64->FindSymbols({"main", "absent"}).size(), 1u);

  std::string path32 =
      WriteFile("small32", SmallElf<Elf32_Ehdr, Elf32_Shdr, Elf32_Sym>(ELFCLASS32, kSymbols));
  EXPECT_EQ(ElfFile::Open(path32).status().code(), absl::StatusCode::kUnimplemented);
  absl::StatusOr<ElfFile> file32 = ElfFile::Open(path32, {.allow_32bit = true});
  ASSERT_TRUE(file32.ok()) << file32.status();
  EXPECT_FALSE(file32->is_64bit());
  EXPECT_EQ(file32->machine(), EM_386);
  EXPECT_THAT(SymbolsOf(*file32), IsSymbols(kSymbols));
  EXPECT_EQ(file32->FindSymbols({"memcpy"}).at("memcpy"), (ElfSymbol{0x1100, 0x20}));
}

TEST(ElfFileTest, SymbolTablesThatCannotBeReadWholeAreRefusedNamingFileAndSection) {
  using Tamper = void (*)(std::vector<Elf64_Shdr>&);
  const std::vector<std::pair<Tamper, std::string>> cases = {
      {[](std::vector<Elf64_Shdr>& s) { s[2].sh_entsize = 20; }, "entries of 20 bytes, not 24"},
      {[](std::vector<Elf64_Shdr>& s) { s[2].sh_size -= 4; }, "not a whole number of entries"},
      {[](std::vector<Elf64_Shdr>& s) { s[2].sh_offset = uint64_t{1} << 40; },
       "lies outside the file"},
      {[](std::vector<Elf64_Shdr>& s) { s[2].sh_size = uint64_t{24} << 40; },
       "lies outside the file"},
      {[](std::vector<Elf64_Shdr>& s) { s[2].sh_link = 2; }, "not a string table"},
      {[](std::vector<Elf64_Shdr>& s) { s[2].sh_link = 99; }, "not a string table"},
      {[](std::vector<Elf64_Shdr>& s) { s[1].sh_size = ~uint64_t{0}; }, "outside the file"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string path = WriteFile(
        absl::StrCat("tampered", i),
        SmallElf<Elf64_Ehdr, Elf64_Shdr, Elf64_Sym>(ELFCLASS64, kSymbols, cases[i].first));
    absl::StatusOr<ElfFile> file = ElfFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    int visited = 0;
    absl::Status status = file->ForEachSymbol([&](const ElfSymbolEntry&) { ++visited; });
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << cases[i].second;
    EXPECT_THAT(status.message(), HasSubstr(path));
    EXPECT_THAT(status.message(), HasSubstr(".symtab (section 2)"));
    EXPECT_THAT(status.message(), HasSubstr(cases[i].second));
    EXPECT_EQ(visited, 0);
    EXPECT_TRUE(file->FindSymbols({"main"}).empty());
  }
}

TEST(ElfFileTest, NamesRunningOffTheirTableAreEmpty) {
  std::string bytes = SmallElf<Elf64_Ehdr, Elf64_Shdr, Elf64_Sym>(
      ELFCLASS64, kSymbols,
      // The string table ends inside "main": no NUL is left for it.
      [](std::vector<Elf64_Shdr>& s) { s[1].sh_size = 3; });
  absl::StatusOr<ElfFile> file = ElfFile::Open(WriteFile("cut_names", bytes));
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<std::string> names;
  ASSERT_TRUE(
      file->ForEachSymbol([&](const ElfSymbolEntry& symbol) { names.emplace_back(symbol.name); })
          .ok());
  EXPECT_EQ(names, std::vector<std::string>(4, ""));
}

TEST(ElfFileTest, VdsoImageIsTheMappedVdsoWhole) {
  absl::Span<const uint8_t> image = VdsoImage();
  if (getauxval(AT_SYSINFO_EHDR) == 0) GTEST_SKIP() << "no vDSO";
  ASSERT_FALSE(image.empty());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(image.data()), getauxval(AT_SYSINFO_EHDR));
  // Within its mapping, and a file readelf reads whole.
  std::ifstream maps("/proc/self/maps");
  uint64_t end = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("[vdso]") == std::string::npos) continue;
    ASSERT_TRUE(absl::SimpleHexAtoi(
        line.substr(line.find('-') + 1, line.find(' ') - line.find('-') - 1), &end));
  }
  EXPECT_LE(reinterpret_cast<uintptr_t>(image.data()) + image.size(), end);
  std::string copy =
      WriteFile("vdso.so", std::string(reinterpret_cast<const char*>(image.data()), image.size()));
  absl::StatusOr<ElfFile> file = ElfFile::InMemory(image, "[vdso]");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->build_id(), ReadelfBuildId(copy));
  EXPECT_EQ(OurSymbols(*file), ReadelfSymbols(copy));
  EXPECT_FALSE(ElfFile::InMemory(image.subspan(0, 16), "[vdso]").ok());
}

TEST(KernelBuildIdTest, ReadFromSysKernelNotesWhenTheKernelHasOne) {
  if (access("/sys/kernel/notes", R_OK) != 0) GTEST_SKIP() << "no /sys/kernel/notes";
  std::string build_id = ReadKernelBuildId();
  if (build_id.empty()) GTEST_SKIP() << "this kernel was built without a build id";
  EXPECT_THAT(build_id, testing::MatchesRegex("[0-9a-f]{40}|[0-9a-f]{32}|[0-9a-f]{64}"));
  // The bytes are in the file after a "GNU" note name.
  std::ifstream in("/sys/kernel/notes", std::ios::binary);
  std::string notes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string bytes;
  for (size_t i = 0; i < build_id.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(build_id.substr(i, 2), nullptr, 16)));
  }
  EXPECT_NE(notes.find(std::string("GNU\0", 4) + bytes), std::string::npos);
  EXPECT_EQ(ReadKernelBuildId("/nonexistent/notes"), "");
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

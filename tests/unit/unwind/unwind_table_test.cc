// The unwind tables of real binaries against binutils' reading of the same
// call frame information (`readelf --debug-dump=frames-interp`), row by row:
// every row readelf prints must be the rule the table finds at its address.
#include "daemon/unwind/unwind_table.h"

#include <sys/stat.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/unwind/unwind_table_cache.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

struct ReadelfRow {
  uint64_t loc = 0;
  std::string cfa, rbp, ra;
  bool signal = false;
};

struct ReadelfFde {
  uint64_t start = 0, end = 0;
  std::vector<ReadelfRow> rows;
};

std::string Run(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::string out;
  char buffer[1 << 16];
  size_t n;
  while (pipe && (n = fread(buffer, 1, sizeof(buffer), pipe.get())) > 0) out.append(buffer, n);
  return out;
}

// The FDEs of the .eh_frame section as readelf interprets them. An FDE
// without rows of its own starts with its CIE's initial row.
std::vector<ReadelfFde> ReadelfFdes(const std::string& path) {
  std::string text = Run("readelf --debug-dump=frames-interp '" + path + "' 2>/dev/null");
  std::vector<ReadelfFde> fdes;
  struct CieInfo {
    std::vector<std::string> columns;
    ReadelfRow initial;
    bool signal = false;
  };
  std::map<std::string, CieInfo> cies;
  CieInfo* cie = nullptr;
  ReadelfFde* fde = nullptr;
  bool signal = false;
  std::vector<std::string> columns;
  bool in_eh_frame = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "Contents of the ")) {
      in_eh_frame = absl::StrContains(line, ".eh_frame section");
      continue;
    }
    if (!in_eh_frame) continue;
    // "r3 (rbx)": a register rule names the register again in parentheses.
    std::string cleaned(line);
    for (size_t open; (open = cleaned.find(" (")) != std::string::npos;) {
      size_t close = cleaned.find(')', open);
      if (close == std::string::npos) break;
      cleaned.erase(open, close - open + 1);
    }
    std::vector<absl::string_view> words = absl::StrSplit(cleaned, ' ', absl::SkipEmpty());
    if (words.size() >= 4 && words[3] == "CIE") {
      cie = &cies[std::string(words[0])];
      cie->signal = absl::StrContains(line, "S\"");
      fde = nullptr;
      continue;
    }
    if (words.size() >= 5 && words[3] == "FDE") {
      std::string cie_name(absl::StripPrefix(words[4], "cie="));
      cie = nullptr;
      auto found = cies.find(cie_name);
      std::vector<absl::string_view> range =
          absl::StrSplit(absl::StripPrefix(words[5], "pc="), "..");
      fdes.emplace_back();
      fde = &fdes.back();
      absl::SimpleHexAtoi(range[0], &fde->start);
      absl::SimpleHexAtoi(range[1], &fde->end);
      signal = found != cies.end() && found->second.signal;
      if (found != cies.end()) {
        ReadelfRow initial = found->second.initial;
        initial.loc = fde->start;
        initial.signal = signal;
        fde->rows.push_back(initial);
      }
      continue;
    }
    if (!words.empty() && words[0] == "LOC") {
      columns.clear();
      for (absl::string_view word : words) columns.emplace_back(word);
      continue;
    }
    if (words.size() >= 2 && words[0].size() == 16 && (cie || fde)) {
      ReadelfRow row;
      absl::SimpleHexAtoi(words[0], &row.loc);
      row.rbp = "u";
      for (size_t i = 1; i < words.size() && i < columns.size(); ++i) {
        if (columns[i] == "CFA") row.cfa = std::string(words[i]);
        if (columns[i] == "rbp") row.rbp = std::string(words[i]);
        if (columns[i] == "ra") row.ra = std::string(words[i]);
      }
      if (cie) {
        cie->initial = row;
        continue;
      }
      row.signal = signal;
      // A later row at the same address replaces the earlier one.
      while (!fde->rows.empty() && fde->rows.back().loc >= row.loc) fde->rows.pop_back();
      fde->rows.push_back(row);
    }
  }
  return fdes;
}

// What the table must say for readelf's row; empty when it matches.
std::string Mismatch(const ReadelfRow& want, const pystrobe_unwind_row* got) {
  if (!got) return "no row";
  auto describe = [&] {
    return absl::StrFormat(
        "cfa_rule=%d cfa_offset=%d rbp_rule=%d rbp_offset=%d (readelf: %s %s %s)", got->cfa_rule,
        got->cfa_offset, got->rbp_rule, got->rbp_offset, want.cfa, want.rbp, want.ra);
  };
  if (want.signal) return got->cfa_rule == PYSTROBE_UNWIND_CFA_SIGNAL ? "" : describe();
  if (want.ra == "u") return got->cfa_rule == PYSTROBE_UNWIND_CFA_END ? "" : describe();
  if (want.ra != "c-8" || want.cfa == "exp") {
    // A DWARF expression: only GCC's PLT one is followed.
    bool ok = got->cfa_rule == PYSTROBE_UNWIND_CFA_INVALID ||
              (want.cfa == "exp" && got->cfa_rule == PYSTROBE_UNWIND_CFA_PLT);
    return ok ? "" : describe();
  }
  int64_t offset = 0;
  uint8_t rule = PYSTROBE_UNWIND_CFA_INVALID;
  if (absl::StartsWith(want.cfa, "rsp+")) rule = PYSTROBE_UNWIND_CFA_RSP;
  if (absl::StartsWith(want.cfa, "rbp+")) rule = PYSTROBE_UNWIND_CFA_RBP;
  if (rule != PYSTROBE_UNWIND_CFA_INVALID) absl::SimpleAtoi(want.cfa.substr(4), &offset);
  if (got->cfa_rule != rule) return describe();
  if (rule == PYSTROBE_UNWIND_CFA_INVALID) return "";
  if (got->cfa_offset != offset) return describe();
  if (want.rbp == "u" || want.rbp == "s") {
    return got->rbp_rule == PYSTROBE_UNWIND_RBP_SAME ? "" : describe();
  }
  if (absl::StartsWith(want.rbp, "c")) {
    int64_t rbp_offset = 0;
    absl::SimpleAtoi(want.rbp.substr(1), &rbp_offset);
    return got->rbp_rule == PYSTROBE_UNWIND_RBP_OFFSET && got->rbp_offset == rbp_offset
               ? ""
               : describe();
  }
  return got->rbp_rule == PYSTROBE_UNWIND_RBP_UNKNOWN ? "" : describe();
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Every readelf row of `path` is found in its table; returns rows compared.
void ExpectTableMatchesReadelf(const std::string& path, size_t min_rows) {
  if (!Exists(path)) GTEST_SKIP() << path << " is not installed";
  absl::StatusOr<UnwindTable> table = BuildUnwindTable(path);
  ASSERT_TRUE(table.ok()) << table.status();
  std::vector<ReadelfFde> fdes = ReadelfFdes(path);
  ASSERT_GT(fdes.size(), 100u) << "readelf read no FDEs of " << path;
  std::sort(fdes.begin(), fdes.end(),
            [](const ReadelfFde& a, const ReadelfFde& b) { return a.start < b.start; });
  size_t compared = 0, mismatches = 0;
  uint64_t covered_to = 0;
  for (const ReadelfFde& fde : fdes) {
    // Overlapping FDEs (none in these binaries, but possible): the first wins.
    if (fde.start < covered_to || fde.start == fde.end) continue;
    covered_to = fde.end;
    for (const ReadelfRow& row : fde.rows) {
      if (row.loc >= fde.end) continue;
      ++compared;
      std::string why = Mismatch(row, table->Find(row.loc));
      if (!why.empty() && ++mismatches <= 10) {
        ADD_FAILURE() << path << " at 0x" << std::hex << row.loc << " (FDE 0x" << fde.start << ".."
                      << fde.end << "): " << why;
      }
    }
    // Past a function whose neighbour does not start within its alignment
    // padding (which takes the function's last rule): nothing.
    const pystrobe_unwind_row* after = table->Find(fde.end + 15);
    bool neighbour = std::any_of(fdes.begin(), fdes.end(), [&](const ReadelfFde& f) {
      return f.start >= fde.end && f.start < fde.end + 16;
    });
    if (!neighbour && after && after->cfa_rule != PYSTROBE_UNWIND_CFA_INVALID &&
        ++mismatches <= 10) {
      ADD_FAILURE() << path << ": a rule past the end of FDE 0x" << std::hex << fde.start;
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << compared << " rows";
  EXPECT_GE(compared, min_rows);
  EXPECT_EQ(table->fdes_skipped, 0u);
  std::printf("%s: %zu readelf rows agree; %zu table rows, %zu KiB in the kernel, built in %s\n",
              path.c_str(), compared, table->rows.size(), table->KernelBytes() / 1024,
              absl::FormatDuration(table->build_time).c_str());
}

TEST(UnwindTableTest, DebianPython311MatchesReadelf) {
  ExpectTableMatchesReadelf("/usr/bin/python3.11", 50000);
}
TEST(UnwindTableTest, LibcMatchesReadelf) {
  ExpectTableMatchesReadelf("/lib/x86_64-linux-gnu/libc.so.6", 20000);
}
TEST(UnwindTableTest, LibstdcxxMatchesReadelf) {
  ExpectTableMatchesReadelf("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", 20000);
}
TEST(UnwindTableTest, NumpyExtensionMatchesReadelf) {
  ExpectTableMatchesReadelf(
      "/usr/lib/python3/dist-packages/numpy/core/"
      "_multiarray_umath.cpython-311-x86_64-linux-gnu.so",
      10000);
}
TEST(UnwindTableTest, BlasMatchesReadelf) {
  ExpectTableMatchesReadelf("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3", 1000);
}
TEST(UnwindTableTest, DynamicLoaderMatchesReadelf) {
  ExpectTableMatchesReadelf("/lib64/ld-linux-x86-64.so.2", 1000);
}
TEST(UnwindTableTest, PyenvLibpython312MatchesReadelf) {
  ExpectTableMatchesReadelf("/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0", 20000);
}

TEST(UnwindTableTest, PltEntriesUseThePltRule) {
  absl::StatusOr<UnwindTable> table = BuildUnwindTable("/usr/bin/python3.11");
  ASSERT_TRUE(table.ok()) << table.status();
  size_t plt = 0;
  for (const pystrobe_unwind_row& row : table->rows) {
    if (row.cfa_rule == PYSTROBE_UNWIND_CFA_PLT) {
      ++plt;
      EXPECT_EQ(row.cfa_offset, 11);
    }
  }
  EXPECT_GE(plt, 1u);
}

TEST(UnwindTableTest, SignalTrampolineAndProgramStartAreMarked) {
  absl::StatusOr<UnwindTable> libc = BuildUnwindTable("/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(libc.ok()) << libc.status();
  bool signal = false, end = false;
  for (const pystrobe_unwind_row& row : libc->rows) {
    signal |= row.cfa_rule == PYSTROBE_UNWIND_CFA_SIGNAL;
    end |= row.cfa_rule == PYSTROBE_UNWIND_CFA_END;  // clone, clone3
  }
  EXPECT_TRUE(signal) << "__restore_rt";
  EXPECT_TRUE(end) << "clone";
}

TEST(UnwindTableTest, FileWithoutFrameInformationIsNotFound) {
  EXPECT_EQ(BuildUnwindTable("/etc/hostname").status().code() == absl::StatusCode::kOk, false);
}

TEST(UnwindTableCacheTest, OneIdSharedUntilItsLastUserReleasesIt) {
  UnwindTableCache cache;
  auto first = cache.Acquire("/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->first);
  // Nothing is built until a walk asks.
  EXPECT_EQ(cache.state(first->id), UnwindTableCache::State::kUnbuilt);
  EXPECT_FALSE(cache.load_segments(first->id).empty());
  // The same file under another name (a symlink, /proc/PID/root/...).
  auto second = cache.Acquire("/usr/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->first);
  EXPECT_EQ(first->id, second->id);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_FALSE(cache.Release(first->id));
  EXPECT_TRUE(cache.Release(second->id));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.stats().binaries, 1u);
  EXPECT_EQ(cache.stats().released, 1u);
}

TEST(UnwindTableCacheTest, FileWithoutFrameInformationIsCountedOnce) {
  UnwindTableCache cache;
  EXPECT_FALSE(cache.Acquire("/etc/hostname").ok());
  EXPECT_FALSE(cache.Acquire("/etc/hostname").ok());
  EXPECT_EQ(cache.stats().without_cfi, 1u);
}

TEST(UnwindTableTest, PaddingBetweenFunctionsTakesNoRow) {
  absl::StatusOr<UnwindTable> table = BuildUnwindTable("/lib/x86_64-linux-gnu/libc.so.6");
  ASSERT_TRUE(table.ok()) << table.status();
  // Each INVALID row inside the table marks a gap of 16 bytes or more.
  for (size_t i = 1; i + 1 < table->rows.size(); ++i) {
    if (table->rows[i].cfa_rule == PYSTROBE_UNWIND_CFA_INVALID) {
      EXPECT_GE(table->rows[i + 1].addr - table->rows[i].addr, 16u) << i;
    }
  }
  // The first row opens the first page, for the kernel's page search.
  EXPECT_EQ(table->rows.front().addr % (1u << PYSTROBE_UNWIND_PAGE_SHIFT), 0u);
  EXPECT_EQ(table->KernelBytes(), table->rows.size() * 4 + table->pages.size() * 4);
}

TEST(LoadBiasTest, PieMappedAtItsLoadAddress) {
  std::vector<ElfLoadSegment> segments = {
      {.vaddr = 0x0, .offset = 0x0, .file_size = 0x1000, .mem_size = 0x1000, .executable = false},
      {.vaddr = 0x1000,
       .offset = 0x1000,
       .file_size = 0x2000,
       .mem_size = 0x2000,
       .executable = true}};
  EXPECT_EQ(LoadBias(segments, 0x555555555000, 0x1000), 0x555555554000u);
  EXPECT_EQ(LoadBias(segments, 0x400000, 0x0), 0x400000u);
  EXPECT_EQ(LoadBias(segments, 0x400000, 0x9000), std::nullopt);
}

}  // namespace
}  // namespace pystrobe

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "daemon/symbolizer/kernel_symbolizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

using ::testing::HasSubstr;

// Shaped like /proc/kallsyms on x86-64: aliases at one address, text end
// markers typed 'T', a module, a BPF program and unsorted module addresses.
constexpr char kKallsyms[] =
    "ffffffff81000000 T _stext\n"
    "ffffffff81000000 T startup_64\n"
    "ffffffff81000100 t do_one_initcall\n"
    "ffffffff81000200 W weak_function\n"
    "ffffffff81000300 T schedule\n"
    "ffffffff81001000 T _etext\n"
    "ffffffff81002000 R __start_rodata\n"
    "ffffffff82000000 T _sinittext\n"
    "ffffffff82000100 t init_function\n"
    "ffffffff82000200 T _einittext\n"
    "ffffffffc0002000 t ext4_write\t[ext4]\n"
    "ffffffffc0001000 t ext4_read\t[ext4]\n"
    "ffffffffc0003000 d ext4_data\t[ext4]\n"
    "ffffffffc0010000 t bpf_prog_6deef7357e7b4530_handler\t[bpf]\n";

TEST(KernelSymbolizerTest, ParsesFunctionsAndSkipsDataAndMarkers) {
  absl::StatusOr<KernelSymbolizer> symbolizer = KernelSymbolizer::FromText(kKallsyms);
  ASSERT_TRUE(symbolizer.ok()) << symbolizer.status();
  // startup_64 (alias), do_one_initcall, weak_function, schedule, _sinittext,
  // init_function, ext4_read, ext4_write, the BPF program.
  EXPECT_EQ(symbolizer->function_count(), 9u);
  EXPECT_EQ(symbolizer->malformed_lines(), 0u);
}

TEST(KernelSymbolizerTest, NamesFramesWithKernelSuffix) {
  absl::StatusOr<KernelSymbolizer> symbolizer = KernelSymbolizer::FromText(kKallsyms);
  ASSERT_TRUE(symbolizer.ok()) << symbolizer.status();
  EXPECT_EQ(symbolizer->Symbolize(0xffffffff81000310), "schedule_[k]");
  EXPECT_EQ(symbolizer->Symbolize(0xffffffff81000205), "weak_function_[k]");
  EXPECT_EQ(symbolizer->Symbolize(0xffffffff82000150), "init_function_[k]");
}

TEST(KernelSymbolizerTest, KeepsFirstListedAliasAtOneAddress) {
  absl::StatusOr<KernelSymbolizer> symbolizer = KernelSymbolizer::FromText(kKallsyms);
  ASSERT_TRUE(symbolizer.ok()) << symbolizer.status();
  EXPECT_EQ(symbolizer->Symbolize(0xffffffff81000010), "_stext_[k]");
}

TEST(KernelSymbolizerTest, LooksUpAtFunctionBoundaries) {
  absl::StatusOr<KernelSymbolizer> symbolizer = KernelSymbolizer::FromText(kKallsyms);
  ASSERT_TRUE(symbolizer.ok()) << symbolizer.status();
  std::optional<KernelSymbol> first_byte = symbolizer->Lookup(0xffffffff81000300);
  ASSERT_TRUE(first_byte.has_value());
  EXPECT_EQ(first_byte->name, "schedule");
  EXPECT_EQ(first_byte->offset, 0u);
  // The last byte before the next function still belongs to this one.
  std::optional<KernelSymbol> last_byte = symbolizer->Lookup(0xffffffff810002ff);
  ASSERT_TRUE(last_byte.has_value());
  EXPECT_EQ(last_byte->name, "weak_function");
  EXPECT_EQ(last_byte->offset, 0xffu);
}

TEST(KernelSymbolizerTest, ReportsUnknownOutsideText) {
  absl::StatusOr<KernelSymbolizer> symbolizer = KernelSymbolizer::FromText(kKallsyms);
  ASSERT_TRUE(symbolizer.ok()) << symbolizer.status();
  EXPECT_EQ(symbolizer->Symbolize(0x1000), "[unknown]_[k]");              // User space.
  EXPECT_EQ(symbolizer->Symbolize(0xffffffff80ffffff), "[unknown]_[k]");  // Before _stext.
  EXPECT_EQ(symbolizer->Symbolize(0xffffffff81001000), "[unknown]_[k]");  // At _etext.
  EXPECT_EQ(symbolizer->Symbolize(0xffffffff81002010), "[unknown]_[k]");  // rodata.
  EXPECT_EQ(symbolizer->Symbolize(0xffffffff82000200), "[unknown]_[k]");  // _einittext.
  EXPECT_EQ(symbolizer->Symbolize(0xffffffffc0003008), "[unknown]_[k]");  // Module data.
  EXPECT_FALSE(symbolizer->Lookup(0xffffffff81001000).has_value());
}

TEST(KernelSymbolizerTest, ResolvesModuleAndBpfFunctions) {
  absl::StatusOr<KernelSymbolizer> symbolizer = KernelSymbolizer::FromText(kKallsyms);
  ASSERT_TRUE(symbolizer.ok()) << symbolizer.status();
  std::optional<KernelSymbol> read = symbolizer->Lookup(0xffffffffc0001010);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->name, "ext4_read");
  EXPECT_EQ(read->module, "ext4");
  EXPECT_EQ(read->offset, 0x10u);
  EXPECT_EQ(symbolizer->Symbolize(0xffffffffc0002fff), "ext4_write_[k]");
  std::optional<KernelSymbol> prog = symbolizer->Lookup(0xffffffffc0010040);
  ASSERT_TRUE(prog.has_value());
  EXPECT_EQ(prog->name, "bpf_prog_6deef7357e7b4530_handler");
  EXPECT_EQ(prog->module, "bpf");
  std::optional<KernelSymbol> core = symbolizer->Lookup(0xffffffff81000300);
  ASSERT_TRUE(core.has_value());
  EXPECT_EQ(core->module, "");
}

TEST(KernelSymbolizerTest, SkipsAndCountsMalformedLines) {
  absl::StatusOr<KernelSymbolizer> symbolizer = KernelSymbolizer::FromText(
      "ffffffff81000000 T good_one\n"
      "not_hex T bad_address\n"
      "ffffffff81000100 TT bad_type\n"
      "ffffffff81000200\n"
      "ffffffff81000300 t bad_module\t[unterminated\n"
      "ffffffff81000400 t too many fields here\n"
      "\n"
      "ffffffff81000500 T good_two\n");
  ASSERT_TRUE(symbolizer.ok()) << symbolizer.status();
  EXPECT_EQ(symbolizer->malformed_lines(), 5u);
  EXPECT_EQ(symbolizer->function_count(), 2u);
  // good_one spans up to good_two, since the malformed lines are gone.
  EXPECT_EQ(symbolizer->Symbolize(0xffffffff81000450), "good_one_[k]");
  EXPECT_EQ(symbolizer->Symbolize(0xffffffff81000500), "good_two_[k]");
}

TEST(KernelSymbolizerTest, HiddenAddressesAreAClearError) {
  absl::StatusOr<KernelSymbolizer> symbolizer = KernelSymbolizer::FromText(
      "0000000000000000 T _stext\n"
      "0000000000000000 T schedule\n"
      "0000000000000000 t ext4_read\t[ext4]\n");
  EXPECT_EQ(symbolizer.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(symbolizer.status().message(),
              HasSubstr("kallsyms addresses are hidden: run as root or set "
                        "kernel.kptr_restrict=0"));
}

TEST(KernelSymbolizerTest, TextWithoutFunctionsIsAnError) {
  EXPECT_FALSE(KernelSymbolizer::FromText("").ok());
  EXPECT_FALSE(KernelSymbolizer::FromText("ffffffff82000000 D some_data\n").ok());
}

TEST(KernelSymbolizerTest, UnreadableFileIsAnError) {
  absl::StatusOr<KernelSymbolizer> symbolizer =
      KernelSymbolizer::FromFile("/nonexistent/pystrobe/kallsyms");
  EXPECT_EQ(symbolizer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(symbolizer.status().message(), HasSubstr("/nonexistent/pystrobe/kallsyms"));
}

// As root (and kptr_restrict < 2) the real file has addresses and names the
// scheduler; otherwise loading fails with the clear error.
TEST(KernelSymbolizerTest, ReadsRealKallsymsOrExplainsWhyNot) {
  absl::StatusOr<KernelSymbolizer> symbolizer = KernelSymbolizer::FromFile();
  if (geteuid() != 0) {
    ASSERT_EQ(symbolizer.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(symbolizer.status().message(), HasSubstr("kallsyms addresses are hidden"));
    return;
  }
  ASSERT_TRUE(symbolizer.ok()) << symbolizer.status();
  EXPECT_GT(symbolizer->function_count(), 1000u);
  EXPECT_EQ(symbolizer->malformed_lines(), 0u);

  // Find schedule() independently of the parser and look it up.
  std::ifstream kallsyms("/proc/kallsyms");
  std::string line;
  uint64_t schedule = 0;
  while (std::getline(kallsyms, line)) {
    if (absl::EndsWith(line, " T schedule")) {
      ASSERT_TRUE(absl::SimpleHexAtoi(line.substr(0, line.find(' ')), &schedule));
      break;
    }
  }
  ASSERT_NE(schedule, 0u);
  EXPECT_EQ(symbolizer->Symbolize(schedule + 1), "schedule_[k]");
}

}  // namespace
}  // namespace pystrobe

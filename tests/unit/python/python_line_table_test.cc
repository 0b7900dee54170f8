// The line table decoders against the interpreters themselves: each installed
// CPython compiles real code (stdlib modules and tricky synthetic code) and
// prints its raw tables with the line it assigns to every instruction
// (co_lines/co_positions on 3.10+, dis.findlinestarts before); the decoder
// must agree on every instruction.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "daemon/python/line_table.h"
#include "tests/unit/python/python_test_support.h"

namespace pystrobe {
namespace {

using testing::InstalledPython;
using testing::InstalledPythons;
using testing::RunCommand;

std::vector<int32_t> ParseInts(std::istringstream& in) {
  std::vector<int32_t> values;
  int32_t value;
  while (in >> value) values.push_back(value);
  return values;
}

TEST(PythonLineTableTest, DecodersAgreeWithTheInterpreterOnEveryInstruction) {
  const std::vector<InstalledPython> pythons = InstalledPythons(testing::PythonSet::kWithOld);
  ASSERT_FALSE(pythons.empty()) << "no CPython on this machine";
  for (const InstalledPython& python : pythons) {
    SCOPED_TRACE(python.label);
    int status = 0;
    const std::string output = RunCommand(
        python.executable + " " PYSTROBE_SOURCE_DIR "/tests/workloads/python/dump_line_tables.py",
        &status);
    ASSERT_EQ(status, 0) << output.substr(0, 2000);
    const LineTableFormat format = LineTableFormatFor({python.major, python.minor, 0});
    int32_t unit = 0;  // bytes per entry of a "lines" line
    std::istringstream lines(output);
    std::string line;
    LineTable table;
    std::string qualname;
    size_t code_objects = 0, instructions = 0, mismatches = 0;
    while (std::getline(lines, line)) {
      std::istringstream in(line);
      std::string kind;
      in >> kind;
      if (kind == "unit") {
        in >> unit;
      } else if (kind == "code") {
        int32_t first_line = 0;
        std::string hex;
        in >> first_line >> hex >> qualname;
        const std::string bytes = hex == "-" ? std::string() : absl::HexStringToBytes(hex);
        table = LineTable::Decode(
            format,
            absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
            first_line);
        ++code_objects;
      } else if (kind == "lines" || kind == "positions") {
        const std::vector<int32_t> expected = ParseInts(in);
        for (size_t i = 0; i < expected.size(); ++i) {
          ++instructions;
          const int32_t offset = static_cast<int32_t>(unit * i);
          if (table.LineForOffset(offset) != expected[i] && ++mismatches <= 20) {
            ADD_FAILURE() << kind << " of " << qualname << " at byte offset " << offset
                          << ": decoded " << table.LineForOffset(offset) << ", interpreter says "
                          << expected[i];
          }
        }
      }
    }
    EXPECT_EQ(unit, python.major == 2 ? 1 : 2);
    EXPECT_EQ(mismatches, 0u);
    EXPECT_GT(code_objects, 100u);
    std::cout << "[ CHECKED  ] " << python.label << ": " << code_objects << " code objects, "
              << instructions << " instructions\n";
  }
}

TEST(PythonLineTableTest, LnotabLineDeltasAreUnsignedBefore36) {
  // Six bytes on the first line, four on the next, the rest 200 lines on
  // (2.7) or 56 lines back (3.6+, the same byte read as signed).
  const uint8_t lnotab[] = {6, 1, 4, 200};
  LineTable unsigned_table = LineTable::Decode(LineTableFormatFor({2, 7, 18}), lnotab, 100);
  LineTable signed_table = LineTable::Decode(LineTableFormatFor({3, 6, 15}), lnotab, 100);
  EXPECT_EQ(unsigned_table.LineForOffset(3), 100);
  EXPECT_EQ(unsigned_table.LineForOffset(7), 101);
  EXPECT_EQ(unsigned_table.LineForOffset(12), 301);
  EXPECT_EQ(signed_table.LineForOffset(7), 101);
  EXPECT_EQ(signed_table.LineForOffset(12), 45);
}

TEST(PythonLineTableTest, NegativeOffsetIsTheFirstLine) {
  // An interpreter frame that has not started yet (3.11+ prev_instr before
  // the first instruction, 3.10 f_lasti == -1).
  const uint8_t location_table[] = {0x80 | (13 << 3) | 0, 2};  // one unit, line + 1
  LineTable table = LineTable::Decode(LineTableFormat::kLocationTable, location_table, 10);
  EXPECT_EQ(table.LineForOffset(-2), 10);
  EXPECT_EQ(table.LineForOffset(0), 11);
  EXPECT_EQ(table.LineForOffset(2), -1);  // past the table
}

TEST(PythonLineTableTest, TruncatedLocationTableKeepsWhatWasRead) {
  // A long-form entry whose varint runs off the end is dropped, not guessed.
  const uint8_t location_table[] = {0x80 | (13 << 3) | 1, 4, 0x80 | (14 << 3), 0x41};
  LineTable table = LineTable::Decode(LineTableFormat::kLocationTable, location_table, 1);
  EXPECT_EQ(table.LineForOffset(0), 3);
  EXPECT_EQ(table.LineForOffset(2), 3);
  EXPECT_EQ(table.LineForOffset(4), -1);
}

}  // namespace
}  // namespace pystrobe

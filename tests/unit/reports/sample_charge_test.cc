#include "daemon/reports/sample_charge.h"

#include <string>
#include <string_view>

#include "daemon/reports/flat_report.h"
#include "daemon/reports/recording_reader.h"
#include "gtest/gtest.h"

namespace pystrobe {
namespace {

Recording Folded(std::string_view text) {
  absl::StatusOr<Recording> recording = ParseFolded(text, "test.folded");
  EXPECT_TRUE(recording.ok()) << recording.status();
  return *recording;
}

// The column the first stack of `text` falls in.
CostColumn ColumnOf(std::string_view text) {
  Recording recording = Folded(text);
  std::optional<SampleCharge> charge = ChargeSample(recording, recording.stacks[0], false);
  EXPECT_TRUE(charge.has_value());
  return charge ? charge->column : CostColumn::kMemory;
}

const ReportRow* Find(const FlatReport& report, std::string_view function, int64_t line) {
  for (const ReportRow& row : report.rows) {
    if (row.key.function == function && row.key.line == line) return &row;
  }
  return nullptr;
}

int64_t Column(const ReportRow& row, CostColumn column) {
  return row.columns[static_cast<size_t>(column)];
}

TEST(ClassifyFrameTest, FoldedNamesFollowPystrobesConventions) {
  Recording recording = Folded(
      "p (1);main (m.py:3);PyObject_Call;python3.11+0x14c981;_PyEval_EvalFrameDefault;"
      "libopenblas.so.0+0x10;dgemm_;[unknown] 0x7f00;do_syscall_64_[k];[io wait] 1\n");
  auto kind = [&](size_t at) { return recording.frames[recording.stacks[0].frames[at]].kind; };
  EXPECT_EQ(kind(0), RecordedFrameKind::kPython);
  EXPECT_EQ(kind(1), RecordedFrameKind::kInterpreter);
  EXPECT_EQ(kind(2), RecordedFrameKind::kInterpreter);
  EXPECT_EQ(kind(3), RecordedFrameKind::kInterpreter);
  EXPECT_EQ(kind(4), RecordedFrameKind::kNative);
  EXPECT_EQ(kind(5), RecordedFrameKind::kNative);
  EXPECT_EQ(kind(6), RecordedFrameKind::kNative);  // unknown code is not a marker
  EXPECT_EQ(kind(7), RecordedFrameKind::kKernel);
  EXPECT_EQ(kind(8), RecordedFrameKind::kMarker);
}

TEST(ClassifyFrameTest, PprofMappingsDecideWhereNamesCannot) {
  EXPECT_EQ(ClassifyFrame({"list_sort_impl", "", 0}, "/usr/bin/python3.11"),
            RecordedFrameKind::kInterpreter);
  EXPECT_EQ(ClassifyFrame({"list_sort_impl", "", 0}, "/usr/lib/libpython3.12.so.1.0"),
            RecordedFrameKind::kInterpreter);
  EXPECT_EQ(ClassifyFrame({"PyArray_Sort", "", 0}, "/usr/lib/numpy/_multiarray_umath.so"),
            RecordedFrameKind::kNative);
  EXPECT_EQ(ClassifyFrame({"schedule", "", 0}, "[kernel]"), RecordedFrameKind::kKernel);
}

TEST(ClassifyFrameTest, OnlyCPythonsOwnApiIsTheInterpretersByName) {
  EXPECT_EQ(ClassifyFrame({"PyObject_Call", "", 0}), RecordedFrameKind::kInterpreter);
  EXPECT_EQ(ClassifyFrame({"Py_RunMain", "", 0}), RecordedFrameKind::kInterpreter);
  EXPECT_EQ(ClassifyFrame({"PyArray_MatrixProduct2", "", 0}), RecordedFrameKind::kNative);
  EXPECT_EQ(ClassifyFrame({"Pythagoras", "", 0}), RecordedFrameKind::kNative);
}

TEST(ChargeSampleTest, TheLinesOwnBytecodeIsPython) {
  EXPECT_EQ(ColumnOf("p (1);main (m.py:3);loop (m.py:9) 1\n"), CostColumn::kPython);
  // The interpreter's C code under the line is still the line's Python.
  EXPECT_EQ(ColumnOf("p (1);loop (m.py:9);_PyEval_EvalFrameDefault;python3.11+0x10 1\n"),
            CostColumn::kPython);
}

TEST(ChargeSampleTest, CodeTheLineCalledIsNative) {
  EXPECT_EQ(ColumnOf("p (1);mm (m.py:4);python3.11+0x10;_multiarray_umath.so+0x20;dgemm_ 1\n"),
            CostColumn::kNative);
  // Without --native, an unwalked native leaf.
  EXPECT_EQ(ColumnOf("p (1);mm (m.py:4);[native] 1\n"), CostColumn::kNative);
  // A C extension calling back into the C API is still the extension's time.
  EXPECT_EQ(ColumnOf("p (1);mm (m.py:4);dgemm_;PyObject_Malloc 1\n"), CostColumn::kNative);
}

TEST(ChargeSampleTest, KernelOnCpuIsSystem) {
  EXPECT_EQ(ColumnOf("p (1);write (m.py:4);__libc_write;ksys_write_[k];ext4_write_[k] 1\n"),
            CostColumn::kSystem);
  EXPECT_EQ(ColumnOf("p (1);write (m.py:4);do_syscall_64_[k] 1\n"), CostColumn::kSystem);
}

TEST(ChargeSampleTest, OffCpuLeavesSayWhy) {
  EXPECT_EQ(ColumnOf("[off-cpu];p (1);f (m.py:4);schedule_[k];[io wait] 1\n"), CostColumn::kIoWait);
  EXPECT_EQ(ColumnOf("[off-cpu];p (1);f (m.py:4);schedule_[k];[sleep] 1\n"), CostColumn::kSleep);
  EXPECT_EQ(ColumnOf("[off-cpu];p (1);f (m.py:4);[runqueue] 1\n"), CostColumn::kRunqueue);
  EXPECT_EQ(ColumnOf("[off-cpu];p (1);f (m.py:4);[gil wait] 1\n"), CostColumn::kGilWait);
  EXPECT_EQ(ColumnOf("[off-cpu];p (1);f (m.py:4);schedule_[k] 1\n"), CostColumn::kOtherWait);
}

TEST(ChargeSampleTest, AStackWithoutPythonIsChargedToItsLeaf) {
  Recording recording = Folded("p (1);main;compute 1\n");
  std::optional<SampleCharge> charge = ChargeSample(recording, recording.stacks[0], false);
  ASSERT_TRUE(charge.has_value());
  EXPECT_EQ(charge->position, 1u);
  EXPECT_EQ(charge->column, CostColumn::kNative);
}

TEST(ChargeSampleTest, BytesAreMemory) {
  Recording recording = Folded("p (1);grow (m.py:4);memset 1\n");
  EXPECT_EQ(ChargeSample(recording, recording.stacks[0], true)->column, CostColumn::kMemory);
  EXPECT_TRUE(IsMemorySampleType({"resident_growth", "bytes"}));
  EXPECT_FALSE(IsMemorySampleType({"cpu", "nanoseconds"}));
}

// The numpy program of issue #32: `a @ a` is one Python line whose time is
// in BLAS; it must lead the table, not dgemm_.
TEST(FlatReportColumnsTest, ByLineChargesTheLineThatCalledNativeCode) {
  Recording recording = Folded(
      "[on-cpu];p (1);<module> (mm.py:9);<module> (mm.py:6);python3.11+0x1;multiarray.so+0x2;"
      "dgemm_ 940\n"
      "[on-cpu];p (1);<module> (mm.py:9);<module> (mm.py:6);python3.11+0x1 20\n"
      "[on-cpu];p (1);<module> (mm.py:9);<module> (mm.py:6);dgemm_;page_fault_[k] 10\n"
      "[off-cpu];p (1);<module> (mm.py:9);<module> (mm.py:7);schedule_[k];[io wait] 20\n"
      "[on-cpu];p (1);[unknown] 10\n");
  FlatReport report = BuildFlatReport(recording, {}, ReportGrouping::kLine, ReportSort::kSelf);
  ASSERT_FALSE(report.rows.empty());
  const ReportRow& top = report.rows[0];
  EXPECT_EQ(top.key.function, "<module>");
  EXPECT_EQ(top.key.line, 6);
  EXPECT_EQ(top.self, 970);
  EXPECT_EQ(Column(top, CostColumn::kNative), 940);
  EXPECT_EQ(Column(top, CostColumn::kPython), 20);
  EXPECT_EQ(Column(top, CostColumn::kSystem), 10);
  const ReportRow* io = Find(report, "<module>", 7);
  ASSERT_NE(io, nullptr);
  EXPECT_EQ(Column(*io, CostColumn::kIoWait), 20);
  const ReportRow* blas = Find(report, "dgemm_", 0);
  ASSERT_NE(blas, nullptr);
  EXPECT_EQ(blas->self, 0);
  EXPECT_EQ(blas->total, 950);
  // Every sample is charged once: the columns of all rows make the whole.
  int64_t charged = 0;
  for (const ReportRow& row : report.rows) {
    int64_t sum = 0;
    for (int64_t value : row.columns) sum += value;
    EXPECT_EQ(sum, row.self) << row.key.function;
    charged += row.self;
  }
  EXPECT_EQ(charged, report.total);

  FlatReport by_function =
      BuildFlatReport(recording, {}, ReportGrouping::kFunction, ReportSort::kSelf);
  EXPECT_EQ(by_function.rows[0].key.function, "<module>");
  EXPECT_EQ(Column(by_function.rows[0], CostColumn::kIoWait), 20);
}

TEST(FlatReportColumnsTest, SourceLinesCarryTheirColumns) {
  Recording recording = Folded(
      "p (1);f (nowhere.py:3);dgemm_ 3\n"
      "p (1);f (nowhere.py:4) 1\n");
  SourceReport source = BuildSourceReport(recording, {}, "f", {});
  ASSERT_EQ(source.files.size(), 1u);
  ASSERT_EQ(source.files[0].lines.size(), 2u);
  EXPECT_EQ(source.files[0].lines[0].self, 3);
  EXPECT_EQ(source.files[0].lines[0].columns[static_cast<size_t>(CostColumn::kNative)], 3);
  EXPECT_EQ(source.files[0].lines[1].columns[static_cast<size_t>(CostColumn::kPython)], 1);
}

}  // namespace
}  // namespace pystrobe

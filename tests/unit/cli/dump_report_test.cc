// The renderings of `pystrobe dump`: JSON escaping, the JSON object, the text
// form and /proc stat parsing.
#include "daemon/cli/dump_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace pystrobe {
namespace {

DumpReport SampleReport() {
  DumpReport report;
  report.pid = 1234;
  report.command_line = "python3 app.py --serve";
  report.python_version = "3.11.2";
  report.python_binary = "/usr/bin/python3.11";
  DumpThread main_thread;
  main_thread.tid = 1234;
  main_thread.pthread_id = 0x7f0000001000;
  main_thread.name = "python3";
  main_thread.proc_state = 'S';
  main_thread.frames = {{"wait_here", "/srv/app.py", 12}, {"<module>", "/srv/app.py", 30}};
  DumpThread spinner;
  spinner.tid = 1240;
  spinner.pthread_id = 0x7f0000002000;
  spinner.name = "spin";
  spinner.holds_gil = true;
  spinner.proc_state = 'R';
  spinner.frames = {{"Worker.spin", "/srv/w.py", -1}};
  spinner.truncated = true;
  report.threads = {main_thread, spinner};
  return report;
}

TEST(FormatDumpJsonTest, WritesOneObjectWithEveryThreadAndFrame) {
  EXPECT_EQ(FormatDumpJson(SampleReport()),
            "{\"pid\":1234,\"python_version\":\"3.11.2\",\"free_threaded\":false,\"threads\":["
            "{\"tid\":1234,\"thread_id\":139637976731648,\"name\":\"python3\","
            "\"holds_gil\":false,\"state\":\"idle\",\"proc_state\":\"S\",\"truncated\":false,"
            "\"frames\":[{\"name\":\"wait_here\",\"filename\":\"/srv/app.py\",\"line\":12},"
            "{\"name\":\"<module>\",\"filename\":\"/srv/app.py\",\"line\":30}]},"
            "{\"tid\":1240,\"thread_id\":139637976735744,\"name\":\"spin\","
            "\"holds_gil\":true,\"state\":\"running\",\"proc_state\":\"R\",\"truncated\":true,"
            "\"frames\":[{\"name\":\"Worker.spin\",\"filename\":\"/srv/w.py\",\"line\":null}]}"
            "]}\n");
}

TEST(FormatDumpJsonTest, UnknownTidIsNullAndNamesAreEscaped) {
  DumpReport report;
  report.pid = 7;
  report.python_version = "3.9.18";
  DumpThread thread;
  thread.pthread_id = 42;
  thread.name = "we\"ird\n";
  thread.frames = {{"f\\g", "C:\\x.py", 1}};
  report.threads = {thread};
  EXPECT_EQ(
      FormatDumpJson(report),
      "{\"pid\":7,\"python_version\":\"3.9.18\",\"free_threaded\":false,\"threads\":[{\"tid\":null,"
      "\"thread_id\":42,\"name\":\"we\\\"ird\\n\",\"holds_gil\":false,"
      "\"state\":\"unknown\",\"proc_state\":\"?\",\"truncated\":false,\"frames\":["
      "{\"name\":\"f\\\\g\",\"filename\":\"C:\\\\x.py\",\"line\":1}]}]}\n");
}

TEST(FormatDumpJsonTest, NoThreads) {
  DumpReport report;
  report.pid = 9;
  report.python_version = "3.13.0";
  EXPECT_EQ(FormatDumpJson(report),
            "{\"pid\":9,\"python_version\":\"3.13.0\",\"free_threaded\":false,\"threads\":[]}\n");
}

TEST(FormatDumpJsonTest, AFreeThreadedProcessSaysItHasNoGil) {
  DumpReport report;
  report.pid = 9;
  report.python_version = "3.14.10";
  report.free_threaded = true;
  DumpThread thread;
  thread.tid = 10;
  thread.holds_gil = false;  // its GIL is off: no thread holds it
  report.threads.push_back(thread);
  const std::string json = FormatDumpJson(report);
  EXPECT_THAT(json, ::testing::HasSubstr("\"free_threaded\":true"));
  EXPECT_THAT(json, ::testing::HasSubstr("\"holds_gil\":null"));
  const std::string text = FormatDumpText(report);
  EXPECT_THAT(text, ::testing::HasSubstr("Python v3.14.10 free-threaded, no GIL"));
  EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("holds the GIL")));
}

TEST(FormatDumpTextTest, InnermostFrameFirstLikePySpyDump) {
  EXPECT_EQ(FormatDumpText(SampleReport()),
            "Process 1234: python3 app.py --serve\n"
            "Python v3.11.2 (/usr/bin/python3.11)\n"
            "\n"
            "Thread 1234 \"python3\" (idle)\n"
            "    wait_here (/srv/app.py:12)\n"
            "    <module> (/srv/app.py:30)\n"
            "\n"
            "Thread 1240 \"spin\" (running, holds the GIL)\n"
            "    Worker.spin (/srv/w.py)\n"
            "    [truncated]\n");
}

TEST(FormatDumpTextTest, ThreadWithoutTidOrFramesSaysSo) {
  DumpReport report;
  report.pid = 5;
  report.command_line = "x";
  report.python_version = "3.8.18";
  report.python_binary = "/lib/libpython3.8.so.1.0";
  DumpThread thread;
  thread.pthread_id = 0xabc;
  thread.proc_state = 'D';
  report.threads = {thread};
  EXPECT_EQ(FormatDumpText(report),
            "Process 5: x\nPython v3.8.18 (/lib/libpython3.8.so.1.0)\n\n"
            "Thread 0xabc \"\" (idle)\n    (no Python frames)\n");
}

DumpReport AsyncioReport() {
  DumpReport report = SampleReport();
  report.asyncio = true;
  DumpAsyncioTask io;
  io.name = "io-\"0\"";
  io.stack = {{"serve", "/srv/app.py", 40}, {"query_db", "/srv/app.py", 22}};
  io.awaited_by = {"main"};
  DumpAsyncioTask cpu;
  cpu.name = "cpu-0";
  cpu.running = true;
  report.asyncio_tasks = {cpu, io};
  report.asyncio_unreadable = 2;
  return report;
}

TEST(FormatDumpJsonTest, AsyncioTasksSitBesideThreadsOnlyWhenAskedFor) {
  EXPECT_EQ(FormatDumpJson(SampleReport()).find("asyncio_tasks"), std::string::npos);
  const std::string json = FormatDumpJson(AsyncioReport());
  EXPECT_NE(json.find(",\"asyncio_tasks\":[{\"name\":\"cpu-0\",\"state\":\"running\",\"stack\":[],"
                      "\"awaited_by\":[]},{\"name\":\"io-\\\"0\\\"\",\"state\":\"pending\","
                      "\"stack\":[{\"name\":\"serve\",\"filename\":\"/srv/app.py\",\"line\":40},"
                      "{\"name\":\"query_db\",\"filename\":\"/srv/app.py\",\"line\":22}],"
                      "\"awaited_by\":[\"main\"]}],\"asyncio_unreadable\":2}\n"),
            std::string::npos)
      << json;
}

TEST(FormatDumpTextTest, AsyncioTasksOutermostFirstWithTheirAwaiters) {
  const std::string text = FormatDumpText(AsyncioReport());
  EXPECT_NE(text.find("\nTask \"cpu-0\" (running)\n    (no coroutine frames)\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\nTask \"io-\"0\"\" (pending), awaited by \"main\"\n"
                      "    serve (/srv/app.py:40)\n    query_db (/srv/app.py:22)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("2 asyncio task(s) or task set(s) changed while being read"),
            std::string::npos);
}

TEST(ProcStatStateTest, ReadsTheFieldAfterTheLastParenthesis) {
  EXPECT_EQ(ProcStatState("1234 (python3) R 1 1234 1234 0 -1"), 'R');
  EXPECT_EQ(ProcStatState("1234 (a) b) S 1 2"), 'S');
  EXPECT_EQ(ProcStatState("1234 (x y) D 1"), 'D');
  EXPECT_EQ(ProcStatState("garbage"), '?');
  EXPECT_EQ(ProcStatState("1 (x)"), '?');
  EXPECT_EQ(ProcStatState("1 (x) 3"), '?');
}

TEST(ThreadActivityTest, OnlyRIsRunning) {
  EXPECT_EQ(ThreadActivity('R'), "running");
  EXPECT_EQ(ThreadActivity('S'), "idle");
  EXPECT_EQ(ThreadActivity('D'), "idle");
  EXPECT_EQ(ThreadActivity('T'), "idle");
  EXPECT_EQ(ThreadActivity('?'), "unknown");
}

}  // namespace
}  // namespace pystrobe

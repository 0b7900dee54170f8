// The procfs module against this test process's own /proc files, a child that
// has exited, and crafted files (a comm with ')' and spaces, a truncated stat
// line, files longer than the bound).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/procfs/maps.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/process_files.h"
#include "daemon/procfs/small_file.h"
#include "daemon/procfs/stat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pystrobe::procfs {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

class CraftedFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/procfs_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf '", dir_, "'").c_str()); }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::string dir_;
};

// A child that has exited and been reaped: its pid names no process.
pid_t ExitedChild() {
  pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

TEST(PathsTest, NameTheFilesOfAProcessAThreadAndItsRoot) {
  EXPECT_EQ(Path("kallsyms"), "/proc/kallsyms");
  EXPECT_EQ(PidPath(12), "/proc/12");
  EXPECT_EQ(PidPath(12, "maps"), "/proc/12/maps");
  EXPECT_EQ(PidPath("self", "exe"), "/proc/self/exe");
  EXPECT_EQ(PidPath(12, "maps", "/tmp/fake"), "/tmp/fake/12/maps");
  EXPECT_EQ(TaskPath(12, 13, "comm"), "/proc/12/task/13/comm");
  EXPECT_EQ(RootPath(12, "/usr/bin/python3"), "/proc/12/root/usr/bin/python3");
  EXPECT_EQ(RootPath(12, "tmp/x"), "/proc/12/root/tmp/x");
  EXPECT_EQ(MapFilesPath(12, 0x7f00, 0x8f00), "/proc/12/map_files/7f00-8f00");
  EXPECT_EQ(SelfFdPath(3), "/proc/self/fd/3");
}

TEST(PathsTest, AMappedFileIsOpenedThroughTheProcessRootWhereItIsThere) {
  // Our own root is "/": the file is found through it.
  EXPECT_EQ(MappedFilePath(getpid(), "/proc/self/status"),
            absl::StrCat("/proc/", getpid(), "/root/proc/self/status"));
  // A name that is nowhere stays through the root, where the process sees it.
  EXPECT_EQ(MappedFilePath(getpid(), "/nonexistent/lib.so"),
            absl::StrCat("/proc/", getpid(), "/root/nonexistent/lib.so"));
  // A process that is gone has no root: a file that is here is named as it is
  // (maps of a chrooted process already carry the chroot's folder).
  EXPECT_EQ(MappedFilePath(ExitedChild(), "/proc/self/status"), "/proc/self/status");
}

TEST(ReadSmallFileTest, ReadsThisProcessStatusToTheEnd) {
  absl::StatusOr<std::string> status = ReadSmallFile(PidPath(getpid(), "status"));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_THAT(StatusField(*status, "Pid"), Optional(std::string(absl::StrCat(getpid()))));
  // The last line is there: /proc reports size 0, and a reader trusting it reads nothing.
  EXPECT_THAT(*status, HasSubstr("nonvoluntary_ctxt_switches"));
}

TEST(ReadSmallFileTest, AnExitedProcessIsNotFoundNamingThePath) {
  const std::string path = PidPath(ExitedChild(), "stat");
  absl::StatusOr<std::string> text = ReadSmallFile(path);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(text.status().message(), HasSubstr(absl::StrCat("cannot read ", path, ": ")));
}

TEST(ReadSmallFileTest, AProcessThatExitsWhileItsFileIsOpenIsNotFound) {
  // An exit between open and read makes read(2) fail with ESRCH, which the
  // reader reports as NotFound, the same as a file that never opened.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t child = fork();
  if (child == 0) {
    close(pipe_fds[1]);  // so that the parent's close is the end of the pipe
    char byte;
    (void)!read(pipe_fds[0], &byte, 1);
    _exit(0);
  }
  const std::string path = PidPath(child, "stat");
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  close(pipe_fds[1]);
  waitpid(child, nullptr, 0);
  char buffer[256];
  EXPECT_EQ(read(fd, buffer, sizeof(buffer)), -1);
  EXPECT_EQ(errno, ESRCH);
  close(fd);
  close(pipe_fds[0]);
  EXPECT_EQ(FileError(path, ESRCH).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadStat(path).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadComm(PidPath(child, "comm")), "");
  EXPECT_TRUE(ReadTaskIds(child).empty());
  EXPECT_EQ(ReadLink(PidPath(child, "exe")).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CraftedFiles, AFileLongerThanTheBoundIsRefusedSayingSo) {
  std::string path = Write("long", std::string(100, 'x'));
  absl::StatusOr<std::string> text = ReadSmallFile(path, {.max_bytes = 99});
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(text.status().message(), HasSubstr(absl::StrCat(path, ": larger than 99 bytes")));
  // Exactly the bound is not too long.
  EXPECT_THAT(ReadSmallFile(path, {.max_bytes = 100}),
              absl::StatusOr<std::string>(std::string(100, 'x')));
  // Or its first bytes, when that is what is asked for.
  EXPECT_EQ(*ReadSmallFile(path, {.max_bytes = 3, .truncate = true}), "xxx");
}

TEST_F(CraftedFiles, AFileWithNoEndIsCutAtTheBound) {
  absl::StatusOr<std::string> text = ReadSmallFile("/dev/zero", {.max_bytes = 1 << 20});
  EXPECT_THAT(text.status().message(), HasSubstr("larger than 1048576 bytes"));
}

TEST_F(CraftedFiles, OnlyRegularFilesWhenAsked) {
  absl::StatusOr<std::string> text = ReadSmallFile(dir_, {.regular_file_only = true});
  EXPECT_THAT(text.status().message(), HasSubstr(absl::StrCat(dir_, ": not a file")));
  // Without the check a directory fails at read(2), as the kernel says.
  EXPECT_THAT(ReadSmallFile(dir_).status().message(), HasSubstr("Is a directory"));
  std::string fifo = absl::StrCat(dir_, "/fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // A FIFO with no writer would block open(2): refused at once instead.
  EXPECT_THAT(ReadSmallFile(fifo, {.regular_file_only = true}).status().message(),
              HasSubstr("not a file"));
}

TEST_F(CraftedFiles, MissingAndUnreadableFilesHaveTheirCodes) {
  EXPECT_EQ(ReadSmallFile(dir_ + "/none").status().code(), absl::StatusCode::kNotFound);
  std::string path = Write("closed", "x");
  chmod(path.c_str(), 0);
  if (geteuid() != 0) {
    EXPECT_EQ(ReadSmallFile(path).status().code(), absl::StatusCode::kPermissionDenied);
  }
}

// Lines of every length up to a few KiB, so that many cross a 64 KiB read.
TEST_F(CraftedFiles, EachLineComesWholeAcrossReads) {
  std::vector<std::string> written;
  std::string text;
  for (int i = 0; text.size() < 300 * 1024; ++i) {
    written.push_back(std::string(static_cast<size_t>(i * 37 % 3000), 'a' + i % 26));
    text += written.back() + "\n";
  }
  written.push_back("last, without a newline");
  text += written.back();
  std::vector<std::string> read;
  ASSERT_TRUE(ForEachLine(Write("lines", text), [&](absl::string_view line) {
                read.emplace_back(line);
              }).ok());
  EXPECT_EQ(read, written);
}

TEST_F(CraftedFiles, ALineLongerThanTheBufferComesInPieces) {
  std::string text = std::string(64 * 1024 + 10, 'x') + "\nshort\n";
  std::vector<size_t> sizes;
  ASSERT_TRUE(ForEachLine(Write("long", text), [&](absl::string_view line) {
                sizes.push_back(line.size());
              }).ok());
  EXPECT_THAT(sizes, ElementsAre(64 * 1024, 10, 5));
}

TEST_F(CraftedFiles, ForEachLineOfAMissingFileIsNotFoundNamingIt) {
  absl::Status status = ForEachLine(dir_ + "/none", [](absl::string_view) {});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(dir_ + "/none"));
}

TEST(StatLineTest, ThisProcessIsRunningWithItsStartTime) {
  absl::StatusOr<StatLine> stat = ReadStat(PidPath(getpid(), "stat"));
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->state(), 'R');
  EXPECT_EQ(stat->comm(), ReadComm(PidPath(getpid(), "comm")));
  EXPECT_GT(stat->field_count(), 44);
  EXPECT_TRUE(stat->Number(22).has_value());  // starttime
  EXPECT_THAT(stat->Number(4), Optional(static_cast<uint64_t>(getppid())));
}

TEST_F(CraftedFiles, ACommWithParenthesesAndSpacesEndsAtTheLastParenthesis) {
  std::string path = Write("stat", "42 (a) b (c) S 1 42 42 0 -1 4194560 7 0 0 0 13 21\n");
  absl::StatusOr<StatLine> stat = ReadStat(path);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->comm(), "a) b (c");
  EXPECT_EQ(stat->state(), 'S');
  EXPECT_THAT(stat->Number(4), Optional(1u));
  EXPECT_THAT(stat->Number(14), Optional(13u));  // utime
  EXPECT_THAT(stat->Number(15), Optional(21u));  // stime
  EXPECT_EQ(stat->Number(8), std::nullopt);      // -1: not a count
}

TEST_F(CraftedFiles, ATruncatedStatLineHasNoLaterFields) {
  absl::StatusOr<StatLine> stat = ReadStat(Write("stat", "42 (python3) R 1 42"));
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->state(), 'R');
  EXPECT_EQ(stat->field_count(), 5);
  EXPECT_EQ(stat->Number(22), std::nullopt);
  // Cut inside the name: no fields at all.
  absl::StatusOr<StatLine> cut = ReadStat(Write("cut", "42 (pyth"));
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cut.status().message(), HasSubstr("/cut"));
  EXPECT_EQ(StatLine::Parse("1 (x)")->state(), '?');
  EXPECT_EQ(StatLine::Parse("1 (x) 3")->state(), '?');
}

TEST_F(CraftedFiles, CommLosesOnlyTheKernelsNewline) {
  EXPECT_EQ(ReadComm(Write("comm", "a) b (c\n")), "a) b (c");
  EXPECT_EQ(ReadComm(dir_ + "/none"), "");
}

TEST(StatusFieldTest, FindsNamedLinesOnly) {
  const char kStatus[] = "Name:\tpython3\nVmRSS:\t    1024 kB\nNSpid:\t7\t1\n";
  EXPECT_THAT(StatusField(kStatus, "VmRSS"), Optional(absl::string_view("1024 kB")));
  EXPECT_THAT(StatusField(kStatus, "NSpid"), Optional(absl::string_view("7\t1")));
  EXPECT_EQ(StatusField(kStatus, "VmRS"), std::nullopt);
  EXPECT_EQ(StatusField(kStatus, "Tgid"), std::nullopt);
}

TEST(PidsTest, ThisProcessIsAmongThePids) {
  EXPECT_THAT(ReadPids(), Contains(static_cast<uint32_t>(getpid())));
}

TEST(TaskIdsTest, ThisProcessHasItsMainThread) {
  EXPECT_THAT(ReadTaskIds(getpid()), Contains(getpid()));
  EXPECT_TRUE(ReadTaskIds(ExitedChild()).empty());
}

TEST(ReadLinkTest, ThisProcessHasAnExecutable) {
  absl::StatusOr<std::string> exe = ReadLink(PidPath("self", "exe"));
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_THAT(*exe, HasSubstr("procfs_test"));
}

TEST(MapsTest, ParsesFilesAnonymousMemoryAndPathsWithSpaces) {
  std::vector<MapsLine> lines = ParseMaps(
      "55d0c0001000-55d0c0002000 r-xp 00001000 fe:01 1234 /usr/bin/prog\n"
      "7f0000000000-7f0000100000 r-xp 00026000 08:02 99     /usr/lib/my lib.so (deleted)\n"
      "7f0000200000-7f0000201000 rw-p 00000000 00:00 0 \n"
      "garbage\n"
      "1-2 r-xp zz 00:00 0 /x\n"
      "7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]\n");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].start, 0x55d0c0001000u);
  EXPECT_EQ(lines[0].end, 0x55d0c0002000u);
  EXPECT_EQ(lines[0].offset, 0x1000u);
  EXPECT_EQ(lines[0].dev_major, 0xfeu);
  EXPECT_EQ(lines[0].dev_minor, 1u);
  EXPECT_EQ(lines[0].inode, 1234u);
  EXPECT_TRUE(lines[0].executable());
  EXPECT_EQ(lines[1].path, "/usr/lib/my lib.so (deleted)");
  EXPECT_EQ(lines[2].path, "");
  EXPECT_FALSE(lines[2].executable());
  EXPECT_EQ(lines[3].path, "[vdso]");
}

TEST(MapsTest, ThisProcessMapsItsOwnExecutable) {
  absl::StatusOr<std::string> text = ReadSmallFile(PidPath("self", "maps"));
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<std::string> exe = ReadLink(PidPath("self", "exe"));
  ASSERT_TRUE(exe.ok());
  bool found = false;
  for (const MapsLine& line : ParseMaps(*text)) found |= line.executable() && line.path == *exe;
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace pystrobe::procfs

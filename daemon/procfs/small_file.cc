#include "daemon/procfs/small_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pystrobe::procfs {
namespace {

// Closes the descriptor on every path out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

absl::Status FileError(absl::string_view path, int err) {
  std::string message = absl::StrCat("cannot read ", path, ": ", strerror(err));
  if (err == ENOENT || err == ESRCH) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::FailedPreconditionError(message);
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const ReadOptions& options) {
  int flags = O_RDONLY | O_CLOEXEC;
  if (options.regular_file_only) flags |= O_NONBLOCK;
  FileDescriptor fd(open(path.c_str(), flags));
  if (fd.get() < 0) return FileError(path, errno);
  if (options.regular_file_only) {
    struct stat st;
    if (fstat(fd.get(), &st) != 0) return FileError(path, errno);
    if (!S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat("cannot read ", path, ": not a file"));
    }
  }
  std::string text;
  char buffer[16384];
  while (true) {
    // One byte past the limit tells a file of exactly max_bytes from a longer one.
    size_t wanted = std::min(sizeof(buffer), options.max_bytes + 1 - text.size());
    ssize_t n = read(fd.get(), buffer, wanted);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FileError(path, errno);
    if (n == 0) return text;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > options.max_bytes) {
      if (options.truncate) {
        text.resize(options.max_bytes);
        return text;
      }
      return absl::FailedPreconditionError(
          absl::StrCat("cannot read ", path, ": larger than ", options.max_bytes, " bytes"));
    }
  }
}

absl::Status ForEachLine(const std::string& path,
                         absl::FunctionRef<void(absl::string_view line)> line) {
  FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return FileError(path, errno);
  char buffer[64 * 1024];
  size_t held = 0;  // the start of a line whose end is not read yet
  while (true) {
    ssize_t n = read(fd.get(), buffer + held, sizeof(buffer) - held);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FileError(path, errno);
    absl::string_view text(buffer, held + static_cast<size_t>(n));
    if (n == 0) {
      if (!text.empty()) line(text);
      return absl::OkStatus();
    }
    size_t end;
    while ((end = text.find('\n')) != absl::string_view::npos) {
      line(text.substr(0, end));
      text.remove_prefix(end + 1);
    }
    if (text.size() == sizeof(buffer)) {
      line(text);
      text = {};
    }
    held = text.size();
    std::memmove(buffer, text.data(), held);
  }
}

}  // namespace pystrobe::procfs

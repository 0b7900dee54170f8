#include "daemon/containers/cgroup_resolver.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe {
namespace {

// include/linux/exportfs.h: the handle type kernfs (and so cgroup2) uses; its
// payload is the 64-bit kernfs id, which is what bpf_get_current_cgroup_id()
// returns.
constexpr int kFileIdKernfs = 0xfe;

std::string ErrnoText(int err) { return strerror(err); }

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string DecodeMountinfoField(absl::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && field[i + 1] >= '0' && field[i + 1] <= '3' &&
        field[i + 2] >= '0' && field[i + 2] <= '7' && field[i + 3] >= '0' && field[i + 3] <= '7') {
      out.push_back(static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                                      (field[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

std::string JoinCgroupPath(const std::string& parent, absl::string_view name) {
  return parent == "/" ? absl::StrCat("/", name) : absl::StrCat(parent, "/", name);
}

std::string OnMount(const std::string& mount, const std::string& relative) {
  return relative == "/" ? mount : mount + relative;
}

}  // namespace

std::optional<std::string> FindCgroup2Mount(absl::string_view mountinfo) {
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n', absl::SkipEmpty())) {
    // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS
    size_t separator = line.find(" - ");
    if (separator == absl::string_view::npos) continue;
    std::vector<absl::string_view> before =
        absl::StrSplit(line.substr(0, separator), ' ', absl::SkipEmpty());
    std::vector<absl::string_view> after =
        absl::StrSplit(line.substr(separator + 3), ' ', absl::SkipEmpty());
    if (before.size() < 5 || after.empty()) continue;
    if (after[0] == "cgroup2") return DecodeMountinfoField(before[4]);
  }
  return std::nullopt;
}

absl::StatusOr<std::string> FindCgroup2MountOfThisHost() {
  const std::string path = procfs::Path("self/mountinfo");
  absl::StatusOr<std::string> text = procfs::ReadSmallFile(path);
  if (!text.ok()) return absl::FailedPreconditionError(text.status().message());
  std::optional<std::string> mount = FindCgroup2Mount(*text);
  if (!mount) {
    return absl::NotFoundError(absl::StrCat("no cgroup2 file system is mounted (see ", path,
                                            "); cgroup paths and container ids need cgroup v2"));
  }
  return *mount;
}

bool WalkCgroupTree(const std::string& mount, const std::string& relative_root, size_t limit,
                    const std::function<void(uint64_t id, const std::string& path)>& visit) {
  // Breadth first, so that a walk cut short keeps the outer groups.
  std::deque<std::string> pending = {relative_root};
  size_t visited = 0;
  while (!pending.empty()) {
    std::string relative = std::move(pending.front());
    pending.pop_front();
    int fd = open(OnMount(mount, relative).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;  // removed since its parent was read
    struct stat st;
    if (fstat(fd, &st) != 0) {
      close(fd);
      continue;
    }
    if (visited == limit) {
      close(fd);
      return false;
    }
    ++visited;
    visit(st.st_ino, relative);
    DIR* dir = fdopendir(fd);  // owns fd from here
    if (dir == nullptr) {
      close(fd);
      continue;
    }
    while (struct dirent* entry = readdir(dir)) {
      absl::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      bool is_dir = entry->d_type == DT_DIR;
      if (entry->d_type == DT_UNKNOWN) {
        struct stat child;
        is_dir = fstatat(dirfd(dir), entry->d_name, &child, AT_SYMLINK_NOFOLLOW) == 0 &&
                 S_ISDIR(child.st_mode);
      }
      if (is_dir) pending.push_back(JoinCgroupPath(relative, name));
    }
    closedir(dir);
  }
  return true;
}

absl::StatusOr<std::unique_ptr<CgroupResolver>> CgroupResolver::Create(Options options) {
  if (options.mount.empty()) {
    absl::StatusOr<std::string> mount = FindCgroup2MountOfThisHost();
    if (!mount.ok()) return mount.status();
    options.mount = *mount;
  }
  while (options.mount.size() > 1 && absl::EndsWith(options.mount, "/")) options.mount.pop_back();
  int fd = open(options.mount.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot open the cgroup2 mount ", options.mount, ": ", ErrnoText(errno)));
  }
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0 || fs.f_type != CGROUP2_SUPER_MAGIC) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(options.mount, " is not a cgroup2 file system"));
  }
  std::unique_ptr<CgroupResolver> resolver(new CgroupResolver(std::move(options), fd));
  {
    absl::MutexLock lock(&resolver->mu_);
    resolver->Rescan();
  }
  return resolver;
}

CgroupResolver::CgroupResolver(Options options, int mount_fd)
    : options_(std::move(options)), mount_(options_.mount), mount_fd_(mount_fd) {
  handles_work_ = options_.use_file_handles;
}

CgroupResolver::~CgroupResolver() { close(mount_fd_); }

absl::StatusOr<std::string> CgroupResolver::Normalize(absl::string_view path) const {
  absl::string_view rest = path;
  if (rest == mount_) return std::string("/");
  if (mount_ != "/" && absl::StartsWith(rest, mount_) && rest.size() > mount_.size() &&
      rest[mount_.size()] == '/') {
    rest.remove_prefix(mount_.size());
  }
  if (!absl::StartsWith(rest, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("cgroup path \"", path, "\" is not absolute (e.g. /system.slice)"));
  }
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(rest, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("cgroup path \"", path, "\" must not contain \"..\""));
    }
    parts.push_back(part);
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

void CgroupResolver::Insert(uint64_t id, std::string path) {
  if (paths_.size() >= options_.max_entries && !paths_.contains(id)) {
    paths_.erase(paths_.begin());  // any one: the next rescan restores what is live
  }
  paths_[id] = std::move(path);
}

void CgroupResolver::Rescan() {
  ++stats_.rescans;
  last_rescan_ = options_.now();
  absl::flat_hash_map<uint64_t, std::string> walked;
  bool complete = WalkCgroupTree(mount_, "/", options_.max_entries,
                                 [&](uint64_t id, const std::string& path) { walked[id] = path; });
  if (!complete) ++stats_.truncated_walks;
  // Keep groups removed since the last walk while there is room: samples taken
  // before their removal may still be waiting in the ring buffer.
  for (auto& [id, path] : paths_) {
    if (walked.size() >= options_.max_entries) break;
    walked.try_emplace(id, std::move(path));
  }
  paths_ = std::move(walked);
}

absl::StatusOr<std::string> CgroupResolver::PathByHandle(uint64_t id) {
  struct {
    struct file_handle handle;
    uint64_t id;
  } kernfs_handle;
  kernfs_handle.handle.handle_bytes = sizeof(uint64_t);
  kernfs_handle.handle.handle_type = kFileIdKernfs;
  memcpy(kernfs_handle.handle.f_handle, &id, sizeof(id));
  int fd = open_by_handle_at(mount_fd_, &kernfs_handle.handle, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ESTALE || err == ENOENT) {
      return absl::NotFoundError(absl::StrCat("cgroup id ", id, " does not exist"));
    }
    // EPERM without CAP_DAC_READ_SEARCH, EOPNOTSUPP on old kernels: stop trying.
    handles_work_ = false;
    return absl::UnavailableError(absl::StrCat("open_by_handle_at: ", ErrnoText(err)));
  }
  char target[4096];
  std::string link = procfs::SelfFdPath(fd);
  ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
  int err = errno;
  close(fd);
  if (n < 0) return absl::UnavailableError(absl::StrCat("readlink ", link, ": ", ErrnoText(err)));
  absl::StatusOr<std::string> relative = Normalize(absl::string_view(target, n));
  if (!relative.ok()) {
    // Reached through another mount of the hierarchy (a bind mount, another
    // namespace's view): fall back to the walk.
    return absl::UnavailableError(relative.status().message());
  }
  return relative;
}

absl::StatusOr<std::string> CgroupResolver::PathForId(uint64_t id) {
  absl::MutexLock lock(&mu_);
  if (auto it = paths_.find(id); it != paths_.end()) {
    ++stats_.hits;
    return it->second;
  }
  ++stats_.misses;
  if (handles_work_) {
    absl::StatusOr<std::string> path = PathByHandle(id);
    if (path.ok()) {
      ++stats_.handle_lookups;
      Insert(id, *path);
      return path;
    }
    if (absl::IsNotFound(path.status())) {
      ++stats_.not_found;
      return path.status();
    }
  }
  absl::Time now = options_.now();
  if (last_rescan_ && now - *last_rescan_ < options_.min_rescan_interval) {
    ++stats_.rescans_rate_limited;
    ++stats_.not_found;
    return absl::NotFoundError(
        absl::StrCat("cgroup id ", id, " is not known (rescan rate-limited)"));
  }
  Rescan();
  if (auto it = paths_.find(id); it != paths_.end()) return it->second;
  ++stats_.not_found;
  return absl::NotFoundError(absl::StrCat("cgroup id ", id, " is not a cgroup under ", mount_));
}

absl::StatusOr<uint64_t> CgroupResolver::IdForPath(absl::string_view path) {
  absl::StatusOr<std::string> relative = Normalize(path);
  if (!relative.ok()) return relative.status();
  struct stat st;
  std::string on_mount = OnMount(mount_, *relative);
  if (stat(on_mount.c_str(), &st) != 0) {
    int err = errno;
    std::string message = absl::StrCat("cgroup ", *relative, " (", on_mount, "): ", ErrnoText(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::FailedPreconditionError(message);
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(on_mount, " is not a cgroup directory"));
  }
  absl::MutexLock lock(&mu_);
  Insert(st.st_ino, *relative);
  return st.st_ino;
}

absl::StatusOr<std::vector<uint64_t>> CgroupResolver::DescendantIds(absl::string_view path,
                                                                    size_t limit) {
  absl::StatusOr<std::string> relative = Normalize(path);
  if (!relative.ok()) return relative.status();
  std::vector<std::pair<uint64_t, std::string>> found;
  bool complete = WalkCgroupTree(mount_, *relative, limit, [&](uint64_t id, const std::string& p) {
    found.emplace_back(id, p);
  });
  if (found.empty()) {
    return absl::NotFoundError(
        absl::StrCat("cgroup ", *relative, " does not exist under ", mount_));
  }
  if (!complete) {
    return absl::ResourceExhaustedError(absl::StrCat("cgroup ", *relative, " has more than ", limit,
                                                     " groups (itself and descendants)"));
  }
  std::vector<uint64_t> ids;
  ids.reserve(found.size());
  absl::MutexLock lock(&mu_);
  for (auto& [id, p] : found) {
    ids.push_back(id);
    Insert(id, std::move(p));
  }
  return ids;
}

CgroupResolver::Stats CgroupResolver::stats() const {
  absl::MutexLock lock(&mu_);
  Stats stats = stats_;
  stats.entries = paths_.size();
  return stats;
}

}  // namespace pystrobe

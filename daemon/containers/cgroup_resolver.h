// cgroup v2 ids and paths. BPF tags each sample with bpf_get_current_cgroup_id(),
// the kernfs id of the task's cgroup v2 group, which on 64-bit kernels is the
// inode number of the group's directory in the cgroup2 mount. The resolver
// maps ids to paths (for labels) and paths to ids (for in-kernel targeting).
//
// Paths are relative to the cgroup2 mount: "/" is the root group,
// "/system.slice/nginx.service" a unit's group, as in the "0::" line of
// /proc/PID/cgroup.
#ifndef PYSTROBE_DAEMON_CONTAINERS_CGROUP_RESOLVER_H_
#define PYSTROBE_DAEMON_CONTAINERS_CGROUP_RESOLVER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pystrobe {

// The mount point of the first cgroup2 file system in a /proc/PID/mountinfo
// text ("/sys/fs/cgroup" on a unified host, "/sys/fs/cgroup/unified" on a
// hybrid one), with mountinfo's octal escapes ("\040") decoded.
std::optional<std::string> FindCgroup2Mount(absl::string_view mountinfo);

// Reads /proc/self/mountinfo. NotFound when no cgroup2 file system is mounted.
absl::StatusOr<std::string> FindCgroup2MountOfThisHost();

class CgroupResolver {
 public:
  struct Options {
    // The cgroup2 mount; empty: found from /proc/self/mountinfo.
    std::string mount;
    // Most ids kept; a rescan that finds more keeps the first ones walked
    // (outer groups first) and counts the rest in Stats::truncated_walks.
    size_t max_entries = 65536;
    // A miss rescans the tree at most this often; misses in between are answered
    // NotFound at once. Ids of groups that no longer exist miss forever, so
    // without this a stream of them would walk the tree on every sample.
    absl::Duration min_rescan_interval = absl::Seconds(2);
    // Try open_by_handle_at() on a miss before rescanning: exact and O(1), but
    // needs CAP_DAC_READ_SEARCH.
    bool use_file_handles = true;
    // For tests: the clock behind min_rescan_interval.
    absl::Time (*now)() = absl::Now;
  };

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;          // lookups not answered from the cache
    uint64_t handle_lookups = 0;  // misses answered by open_by_handle_at
    uint64_t rescans = 0;
    uint64_t rescans_rate_limited = 0;  // misses answered NotFound without a rescan
    uint64_t not_found = 0;
    uint64_t truncated_walks = 0;  // walks that stopped at max_entries
    size_t entries = 0;
  };

  // Checks that the mount is a cgroup2 directory and walks it once.
  static absl::StatusOr<std::unique_ptr<CgroupResolver>> Create(Options options);
  ~CgroupResolver();
  CgroupResolver(const CgroupResolver&) = delete;
  CgroupResolver& operator=(const CgroupResolver&) = delete;

  // The path of a cgroup id: from the cache, else by file handle, else by a
  // (rate-limited) rescan. NotFound when the id is not (or no longer) a cgroup.
  // Groups removed after they were cached keep resolving to their old path,
  // which is what samples taken before the removal want; kernfs ids are 64-bit
  // and not reused.
  absl::StatusOr<std::string> PathForId(uint64_t id);

  // The id of a cgroup path ("/a/b", or the same under the mount, e.g.
  // "/sys/fs/cgroup/unified/a/b"), from the directory's inode. Caches it.
  absl::StatusOr<uint64_t> IdForPath(absl::string_view path);

  // The ids of the group at `path` and of every group below it, the group
  // itself first, for a BPF map of targeted cgroups. ResourceExhausted when
  // there are more than `limit` (the map's size).
  absl::StatusOr<std::vector<uint64_t>> DescendantIds(absl::string_view path, size_t limit);

  // `path` made relative to the mount ("/" for the root group); InvalidArgument
  // for paths with ".." or outside the mount.
  absl::StatusOr<std::string> Normalize(absl::string_view path) const;

  const std::string& mount() const { return mount_; }
  Stats stats() const;

 private:
  CgroupResolver(Options options, int mount_fd);

  absl::StatusOr<std::string> PathByHandle(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Rescan() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Insert(uint64_t id, std::string path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const std::string mount_;
  const int mount_fd_;  // O_PATH|O_DIRECTORY fd of the mount, for open_by_handle_at

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::string> paths_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Time> last_rescan_ ABSL_GUARDED_BY(mu_);
  bool handles_work_ ABSL_GUARDED_BY(mu_) = true;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

// Walks the cgroup2 tree below `mount`+`relative_root` (directories only),
// calling visit(id, path relative to the mount) for each group, parents before
// children. Stops, returning false, after `limit` groups. Groups removed during
// the walk are skipped.
bool WalkCgroupTree(const std::string& mount, const std::string& relative_root, size_t limit,
                    const std::function<void(uint64_t id, const std::string& path)>& visit);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CONTAINERS_CGROUP_RESOLVER_H_

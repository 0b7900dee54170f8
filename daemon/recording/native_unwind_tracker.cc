#include "daemon/recording/native_unwind_tracker.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/elf/elf_file.h"
#include "daemon/procfs/maps.h"
#include "daemon/procfs/paths.h"
#include "daemon/procfs/process_files.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe {
namespace {

// How soon a process's mappings may be read again after a stale walk: a
// library just loaded is in every sample until then, and re-reading for
// each would cost more than the samples.
constexpr absl::Duration kRefreshInterval = absl::Milliseconds(20);

bool IsCLibrary(absl::string_view path) {
  absl::string_view name = path.substr(path.rfind('/') + 1);
  return absl::StartsWith(name, "libc.so") || absl::StartsWith(name, "libc-") ||
         absl::StartsWith(name, "ld-linux");
}

}  // namespace

std::vector<ExecutableRegion> ParseExecutableRegions(absl::string_view maps) {
  std::vector<ExecutableRegion> regions;
  for (const procfs::MapsLine& line : procfs::ParseMaps(maps)) {
    if (!line.executable()) continue;
    absl::string_view path = line.path;
    ExecutableRegion region;
    region.start = line.start;
    region.end = line.end;
    region.file_offset = line.offset;
    region.deleted = absl::ConsumeSuffix(&path, " (deleted)");
    region.path = std::string(path);
    if (region.path == "[vsyscall]") continue;
    regions.push_back(std::move(region));
  }
  return regions;
}

NativeUnwindTracker::NativeUnwindTracker(UnwindTableStore* store,
                                         NativeUnwindTrackerOptions options)
    : store_(store),
      proc_(std::move(options.proc)),
      python_only_(options.python_only),
      builder_(options.tables, std::move(options.disk_cache)) {}

NativeUnwindTracker::~NativeUnwindTracker() {
  if (vdso_fd_ >= 0) close(vdso_fd_);
}

std::string NativeUnwindTracker::VdsoPath() {
  // Every process's vDSO is the kernel's one image: ours, copied to a memfd.
  if (vdso_fd_ < 0) {
    absl::Span<const uint8_t> image = VdsoImage();
    if (image.empty()) return "";
    int fd = memfd_create("pystrobe-vdso", MFD_CLOEXEC);
    if (fd < 0) return "";
    if (write(fd, image.data(), image.size()) != static_cast<ssize_t>(image.size())) {
      close(fd);
      return "";
    }
    vdso_fd_ = fd;
  }
  return procfs::SelfFdPath(vdso_fd_);
}

uint32_t NativeUnwindTracker::TableFor(uint32_t pid, const ExecutableRegion& region,
                                       std::vector<uint32_t>& held, uint64_t& bias) {
  bias = 0;
  if (region.anonymous()) return PYSTROBE_UNWIND_TABLE_JIT;
  std::string path;
  if (region.path == "[vdso]") {
    path = VdsoPath();
  } else if (region.deleted) {
    path = procfs::MapFilesPath(pid, region.start, region.end, proc_);
  } else {
    // As the process sees it: another mount namespace (a container) may
    // have another file at the path.
    path = procfs::RootPath(pid, region.path, proc_);
    // /proc/PID/maps names files from the reader's root: a chrooted
    // process's already carry the chroot's folder.
    if (proc_ == procfs::kRoot) path = procfs::MappedFilePath(pid, region.path);
  }
  if (path.empty()) return PYSTROBE_UNWIND_TABLE_NONE;
  absl::StatusOr<UnwindTableCache::Handle> handle = cache_.Acquire(path);
  if (!handle.ok()) return PYSTROBE_UNWIND_TABLE_NONE;
  std::optional<uint64_t> load_bias =
      LoadBias(cache_.load_segments(handle->id), region.start, region.file_offset);
  if (!load_bias) {
    if (cache_.Release(handle->id)) store_->UnloadTable(handle->id);
    return PYSTROBE_UNWIND_TABLE_NONE;
  }
  // A fresh id (maybe another binary's before) is absent in the kernel:
  // the first walk through it asks for its table.
  if (handle->first) store_->UnloadTable(handle->id);
  held.push_back(handle->id);
  bias = *load_bias;
  return handle->id;
}

void NativeUnwindTracker::Release(const std::vector<uint32_t>& tables) {
  for (uint32_t id : tables) {
    if (cache_.Release(id)) {
      store_->UnloadTable(id);
      loaded_.erase(id);
    }
  }
}

void NativeUnwindTracker::Load(uint32_t id) {
  const std::shared_ptr<const UnwindTable>& table = cache_.table(id);
  absl::Status status = store_->LoadTable(id, *table);
  while (absl::IsResourceExhausted(status)) {
    // The least recently walked table makes room; the kernel stamps each
    // table a walk used.
    std::optional<uint32_t> victim;
    uint64_t victim_used = 0;
    for (uint32_t other : loaded_) {
      uint64_t used = store_->LastUsedNs(other);
      if (!victim || used < victim_used) {
        victim = other;
        victim_used = used;
      }
    }
    if (!victim) break;
    store_->UnloadTable(*victim);
    loaded_.erase(*victim);
    ++stats_.tables_evicted;
    status = store_->LoadTable(id, *table);
  }
  if (!status.ok()) {
    store_->MarkUnavailable(id);
    ++stats_.tables_unavailable;
    return;
  }
  loaded_.insert(id);
  ++stats_.tables_loaded;
}

void NativeUnwindTracker::Service(bool asked) {
  for (UnwindTableBuilder::Result& result : builder_.TakeFinished()) {
    // The binary's last process may be gone, and its id another binary's.
    if (!cache_.Holds(result.id, result.key)) continue;
    bool built = result.table.ok();
    cache_.SetBuilt(result.id, std::move(result.table));
    if (built) {
      Load(result.id);
    } else {
      store_->MarkUnavailable(result.id);
      ++stats_.tables_unavailable;
    }
  }
  if (!asked) return;
  for (uint32_t id : store_->TakeWantedTables()) Want(id);
}

void NativeUnwindTracker::Want(uint32_t id) {
  if (loaded_.contains(id)) return;
  switch (cache_.state(id)) {
    case UnwindTableCache::State::kUnbuilt:
      cache_.set_building(id);
      builder_.Enqueue({id, cache_.key(id), cache_.path(id)});
      break;
    case UnwindTableCache::State::kBuilt:
      Load(id);  // evicted for room, wanted again
      break;
    case UnwindTableCache::State::kBuilding:
    case UnwindTableCache::State::kFailed:
      break;
  }
}

void NativeUnwindTracker::Settle(absl::Duration timeout) {
  builder_.WaitIdle(timeout);
  Service(/*asked=*/true);
}

absl::Status NativeUnwindTracker::Track(uint32_t pid) {
  std::string maps = procfs::ReadSmallFile(procfs::PidPath(pid, "maps", proc_)).value_or("");
  if (maps.empty()) {
    // Gone, or a kernel thread: nothing to walk; not read again per sample.
    Forget(pid);
    processes_[pid].read_at = absl::Now();
    return absl::NotFoundError(absl::StrCat("process ", pid, " has no user mappings"));
  }
  std::vector<ExecutableRegion> regions = ParseExecutableRegions(maps);
  std::sort(regions.begin(), regions.end(),
            [](const ExecutableRegion& a, const ExecutableRegion& b) { return a.start < b.start; });
  if (regions.size() > PYSTROBE_UNWIND_MAX_MAPPINGS) regions.resize(PYSTROBE_UNWIND_MAX_MAPPINGS);
  Process fresh;
  fresh.read_at = absl::Now();
  std::vector<pystrobe_unwind_mapping> mappings;
  mappings.reserve(regions.size());
  std::string executable = procfs::ReadLink(procfs::PidPath(pid, "exe", proc_)).value_or("");
  for (const ExecutableRegion& region : regions) {
    pystrobe_unwind_mapping mapping{};
    mapping.start = region.start;
    mapping.end = region.end;
    uint64_t bias = 0;
    mapping.table_id = TableFor(pid, region, fresh.tables, bias);
    mapping.bias = bias;
    mappings.push_back(mapping);
    // Tables wanted now, not one ring-buffer round trip per binary later:
    // the executable's (_start, main) and the C library's
    // (__libc_start_main, clone), which every stack passes through, and
    // those on disk, which walks went through in an earlier run (a torch
    // process: 16 of its 314 binaries).
    if (mapping.table_id < PYSTROBE_UNWIND_TABLE_JIT &&
        (region.path == executable || IsCLibrary(region.path) ||
         (cache_.state(mapping.table_id) == UnwindTableCache::State::kUnbuilt &&
          builder_.OnDisk(cache_.key(mapping.table_id))))) {
      Want(mapping.table_id);
    }
  }
  absl::Status status = store_->SetProcessMappings(pid, mappings);
  // The old references go after the new ones are taken: tables both images
  // map stay loaded.
  auto it = processes_.find(pid);
  if (it != processes_.end()) {
    Release(it->second.tables);
    it->second = std::move(fresh);
    ++stats_.refreshes;
  } else {
    processes_.emplace(pid, std::move(fresh));
  }
  stats_.processes = processes_.size();
  return status;
}

void NativeUnwindTracker::Forget(uint32_t pid) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return;
  store_->RemoveProcess(pid);
  Release(it->second.tables);
  processes_.erase(it);
  stats_.processes = processes_.size();
}

void NativeUnwindTracker::OnRecord(const RingRecord& record) {
  bool asked = false;
  if (const auto* sample = std::get_if<SampleRecord>(&record)) {
    // The walks that use tables: cpu-clock samples and off-CPU stacks.
    if (sample->kind == PYSTROBE_EVENT_SAMPLE || sample->kind == PYSTROBE_EVENT_OFFCPU) {
      asked = sample->flags & PYSTROBE_SAMPLE_NATIVE_TABLE_WANTED;
      auto it = processes_.find(sample->pid);
      if (it == processes_.end()) {
        if (!python_only_ || sample->python_status != PYSTROBE_PY_NOT_PYTHON) {
          Track(sample->pid).IgnoreError();
        }
      } else if ((sample->flags & PYSTROBE_SAMPLE_NATIVE_STALE) &&
                 absl::Now() - it->second.read_at >= kRefreshInterval) {
        Track(sample->pid).IgnoreError();
      }
    }
  } else if (const auto* event = std::get_if<ProcessEventRecord>(&record)) {
    if (event->kind == PYSTROBE_EVENT_EXIT) {
      Forget(event->pid);
    } else if (python_only_) {
      // The new image's first sample decides, if only CPython is walked.
      Forget(event->pid);
    } else {
      Track(event->pid).IgnoreError();
    }
  }
  Service(asked);
}

}  // namespace pystrobe

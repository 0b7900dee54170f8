#include "daemon/recording/native_unwind_tracker.h"

#include <elf.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace pystrobe {
namespace {

// How soon a process's mappings may be read again after a stale walk: a
// library just loaded is in every sample until then, and re-reading for
// each would cost more than the samples.
constexpr absl::Duration kRefreshInterval = absl::Milliseconds(20);

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::vector<ExecutableRegion> ParseExecutableRegions(absl::string_view maps) {
  std::vector<ExecutableRegion> regions;
  for (absl::string_view line : absl::StrSplit(maps, '\n', absl::SkipEmpty())) {
    // start-end perms offset dev inode [path]
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::MaxSplits(' ', 5), absl::SkipEmpty());
    if (fields.size() < 5 || fields[1].size() < 3 || fields[1][2] != 'x') continue;
    ExecutableRegion region;
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(fields[0], '-');
    if (!absl::SimpleHexAtoi(range.first, &region.start) ||
        !absl::SimpleHexAtoi(range.second, &region.end) ||
        !absl::SimpleHexAtoi(fields[2], &region.file_offset)) {
      continue;
    }
    if (fields.size() == 6) {
      absl::string_view path = absl::StripLeadingAsciiWhitespace(fields[5]);
      if (absl::ConsumeSuffix(&path, " (deleted)")) region.deleted = true;
      region.path = std::string(path);
    }
    if (region.path == "[vsyscall]") continue;
    regions.push_back(std::move(region));
  }
  return regions;
}

NativeUnwindTracker::NativeUnwindTracker(UnwindTableStore* store, std::string proc,
                                         bool python_only)
    : store_(store), proc_(std::move(proc)), python_only_(python_only) {}

NativeUnwindTracker::~NativeUnwindTracker() {
  if (vdso_fd_ >= 0) close(vdso_fd_);
}

std::string NativeUnwindTracker::VdsoPath() {
  // Every process's vDSO is the kernel's one image: ours, copied to a memfd.
  if (vdso_fd_ < 0) {
    auto* image = reinterpret_cast<const uint8_t*>(getauxval(AT_SYSINFO_EHDR));
    if (image == nullptr) return "";
    Elf64_Ehdr eh;
    std::memcpy(&eh, image, sizeof(eh));
    size_t size = eh.e_shoff + size_t{eh.e_shnum} * eh.e_shentsize;
    int fd = memfd_create("pystrobe-vdso", MFD_CLOEXEC);
    if (fd < 0) return "";
    if (write(fd, image, size) != static_cast<ssize_t>(size)) {
      close(fd);
      return "";
    }
    vdso_fd_ = fd;
  }
  return absl::StrCat("/proc/self/fd/", vdso_fd_);
}

uint32_t NativeUnwindTracker::TableFor(uint32_t pid, const ExecutableRegion& region,
                                       std::vector<uint32_t>& held, uint64_t& bias) {
  bias = 0;
  if (region.anonymous()) return PYSTROBE_UNWIND_TABLE_JIT;
  std::string path;
  if (region.path == "[vdso]") {
    path = VdsoPath();
  } else if (region.deleted) {
    path = absl::StrFormat("%s/%u/map_files/%x-%x", proc_, pid, region.start, region.end);
  } else {
    // As the process sees it: another mount namespace (a container) may
    // have another file at the path.
    path = absl::StrCat(proc_, "/", pid, "/root", region.path);
    // /proc/PID/maps names files from the reader's root: a chrooted
    // process's already carry the chroot's folder.
    if (proc_ == "/proc") path = PathOfMappedFile(pid, region.path);
  }
  if (path.empty()) return PYSTROBE_UNWIND_TABLE_NONE;
  absl::StatusOr<UnwindTableCache::Handle> handle = cache_.Acquire(path);
  if (!handle.ok()) {
    ++stats_.table_failures;
    return PYSTROBE_UNWIND_TABLE_NONE;
  }
  std::optional<uint64_t> load_bias =
      LoadBias(handle->table->load_segments, region.start, region.file_offset);
  if (!load_bias) {
    if (cache_.Release(handle->id)) store_->UnloadTable(handle->id);
    return PYSTROBE_UNWIND_TABLE_NONE;
  }
  if (handle->built_now) {
    if (!store_->LoadTable(handle->id, *handle->table).ok()) {
      ++stats_.table_failures;
      if (cache_.Release(handle->id)) store_->UnloadTable(handle->id);
      return PYSTROBE_UNWIND_TABLE_NONE;
    }
    ++stats_.tables_loaded;
  }
  held.push_back(handle->id);
  bias = *load_bias;
  return handle->id;
}

void NativeUnwindTracker::Release(const std::vector<uint32_t>& tables) {
  for (uint32_t id : tables) {
    if (cache_.Release(id)) store_->UnloadTable(id);
  }
}

absl::Status NativeUnwindTracker::Track(uint32_t pid) {
  std::string maps = ReadWholeFile(absl::StrCat(proc_, "/", pid, "/maps"));
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
  for (const ExecutableRegion& region : regions) {
    pystrobe_unwind_mapping mapping{};
    mapping.start = region.start;
    mapping.end = region.end;
    uint64_t bias = 0;
    mapping.table_id = TableFor(pid, region, fresh.tables, bias);
    mapping.bias = bias;
    mappings.push_back(mapping);
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

void NativeUnwindTracker::OnRecord(std::span<const uint8_t> record) {
  uint32_t kind, pid;
  if (record.size() < 8) return;
  std::memcpy(&kind, record.data(), 4);
  std::memcpy(&pid, record.data() + 4, 4);
  switch (kind) {
    case PYSTROBE_EVENT_SAMPLE:
    case PYSTROBE_EVENT_OFFCPU: {
      if (record.size() < offsetof(pystrobe_sample, data)) return;
      uint32_t flags;
      uint16_t python_status;
      std::memcpy(&flags, record.data() + offsetof(pystrobe_sample, flags), 4);
      std::memcpy(&python_status, record.data() + offsetof(pystrobe_sample, python_status), 2);
      auto it = processes_.find(pid);
      if (it == processes_.end()) {
        if (python_only_ && python_status == PYSTROBE_PY_NOT_PYTHON) break;
        Track(pid).IgnoreError();
      } else if ((flags & PYSTROBE_SAMPLE_NATIVE_STALE) &&
                 absl::Now() - it->second.read_at >= kRefreshInterval) {
        Track(pid).IgnoreError();
      }
      break;
    }
    case PYSTROBE_EVENT_EXEC:
      // The new image's first sample decides, if only CPython is walked.
      if (python_only_) {
        Forget(pid);
      } else {
        Track(pid).IgnoreError();
      }
      break;
    case PYSTROBE_EVENT_EXIT:
      Forget(pid);
      break;
  }
}

}  // namespace pystrobe

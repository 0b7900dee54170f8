#include "daemon/unwind/unwind_table_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pystrobe {
namespace {

constexpr size_t kHashedBytes = 4096;

absl::StatusOr<FileIdentity> IdentityOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("stat ", path, ": ", strerror(errno)));
  }
  return FileIdentity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_size),
                      int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

// 64-bit FNV-1a: the key names a file in the disk cache, so it must be the
// same in every run (absl::Hash is seeded per process).
uint64_t StableHash(absl::string_view bytes, uint64_t hash = 0xcbf29ce484222325ull) {
  for (char c : bytes) hash = (hash ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return hash;
}

}  // namespace

absl::StatusOr<std::string> UnwindTableCache::ContentKey(const std::string& path,
                                                         const FileIdentity& id) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("open ", path, ": ", strerror(errno)));
  std::vector<char> head(kHashedBytes), tail(kHashedBytes);
  ssize_t head_size = pread(fd, head.data(), head.size(), 0);
  ssize_t tail_size =
      pread(fd, tail.data(), tail.size(), id.size > kHashedBytes ? id.size - kHashedBytes : 0);
  close(fd);
  if (head_size < 0 || tail_size < 0) return absl::DataLossError(absl::StrCat("read ", path));
  uint64_t hash = StableHash(absl::string_view(head.data(), head_size));
  hash = StableHash(absl::string_view(tail.data(), tail_size), hash);
  hash = StableHash(absl::StrCat(id.size), hash);
  return absl::StrFormat("hash:%016x", hash);
}

absl::StatusOr<UnwindTableCache::Handle> UnwindTableCache::Acquire(const std::string& path) {
  absl::StatusOr<FileIdentity> identity = IdentityOf(path);
  if (!identity.ok()) return identity.status();
  if (auto failed = failures_.find(*identity); failed != failures_.end()) return failed->second;

  // A file seen before: its key without reading it again.
  std::string key;
  std::vector<ElfLoadSegment> segments;
  if (auto known = keys_.find(*identity); known != keys_.end()) {
    key = known->second;
  } else {
    absl::StatusOr<ElfFile> file = ElfFile::Open(path);
    absl::Status status = file.status();
    if (status.ok() && !HasCallFrameInformation(path, *file)) {
      status = absl::NotFoundError(absl::StrCat(path, ": no call frame information"));
    }
    if (!status.ok()) {
      ++stats_.without_cfi;
      failures_.emplace(*identity, status);
      return status;
    }
    if (!file->build_id().empty()) {
      key = absl::StrCat("build-id:", file->build_id());
    } else {
      absl::StatusOr<std::string> hashed = ContentKey(path, *identity);
      if (!hashed.ok()) return hashed.status();
      key = *hashed;
    }
    keys_[*identity] = key;
    segments = file->load_segments();
  }
  // Another file with the same contents (a copy, another container's
  // layer) shares the id acquired first.
  if (auto id = ids_.find(key); id != ids_.end()) {
    Entry& entry = entries_[id->second];
    ++entry.references;
    entry.path = path;  // the latest: most likely still there to build from
    ++stats_.shared;
    return Handle{id->second, false};
  }
  if (segments.empty()) {
    // Known by identity, but released since: its headers again.
    absl::StatusOr<ElfFile> file = ElfFile::Open(path);
    if (!file.ok()) return file.status();
    segments = file->load_segments();
  }
  uint32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = next_id_++;
  }
  Entry& entry = entries_[id];
  entry.key = key;
  entry.path = path;
  entry.segments = std::move(segments);
  entry.references = 1;
  ids_[key] = id;
  ++stats_.binaries;
  return Handle{id, true};
}

bool UnwindTableCache::Release(uint32_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  if (--it->second.references > 0) return false;
  ids_.erase(it->second.key);
  entries_.erase(it);
  free_ids_.push_back(id);
  ++stats_.released;
  return true;
}

UnwindTableCache::State UnwindTableCache::state(uint32_t id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? State::kFailed : it->second.state;
}

void UnwindTableCache::set_building(uint32_t id) {
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.state = State::kBuilding;
}

bool UnwindTableCache::Holds(uint32_t id, const std::string& key) const {
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.key == key;
}

void UnwindTableCache::SetBuilt(uint32_t id,
                                absl::StatusOr<std::shared_ptr<const UnwindTable>> table) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  if (table.ok()) {
    it->second.state = State::kBuilt;
    it->second.table = std::move(*table);
  } else {
    it->second.state = State::kFailed;
  }
}

}  // namespace pystrobe

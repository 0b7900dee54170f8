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

absl::StatusOr<UnwindFileIdentity> IdentityOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("stat ", path, ": ", strerror(errno)));
  }
  return UnwindFileIdentity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                            static_cast<uint64_t>(st.st_size),
                            int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

}  // namespace

absl::StatusOr<std::string> UnwindTableCache::ContentKey(const std::string& path,
                                                         const UnwindFileIdentity& id) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("open ", path, ": ", strerror(errno)));
  std::vector<char> head(kHashedBytes), tail(kHashedBytes);
  ssize_t head_size = pread(fd, head.data(), head.size(), 0);
  ssize_t tail_size =
      pread(fd, tail.data(), tail.size(), id.size > kHashedBytes ? id.size - kHashedBytes : 0);
  close(fd);
  if (head_size < 0 || tail_size < 0) return absl::DataLossError(absl::StrCat("read ", path));
  size_t hash = absl::HashOf(absl::string_view(head.data(), head_size),
                             absl::string_view(tail.data(), tail_size), id.size);
  return absl::StrFormat("hash:%016x", hash);
}

absl::StatusOr<UnwindTableCache::Handle> UnwindTableCache::Acquire(const std::string& path) {
  absl::StatusOr<UnwindFileIdentity> identity = IdentityOf(path);
  if (!identity.ok()) return identity.status();
  if (auto failed = failures_.find(*identity); failed != failures_.end()) return failed->second;

  // A file seen before: its key without reading it again.
  if (auto known = keys_.find(*identity); known != keys_.end()) {
    if (auto id = ids_.find(known->second); id != ids_.end()) {
      Entry& entry = entries_[id->second];
      ++entry.references;
      ++stats_.shared;
      return Handle{id->second, entry.table, false};
    }
  }

  absl::StatusOr<UnwindTable> table = BuildUnwindTable(path, options_);
  if (!table.ok()) {
    ++stats_.failed;
    failures_.emplace(*identity, table.status());
    return table.status();
  }
  std::string key;
  if (!table->build_id.empty()) {
    key = absl::StrCat("build-id:", table->build_id);
  } else {
    absl::StatusOr<std::string> hashed = ContentKey(path, *identity);
    if (!hashed.ok()) return hashed.status();
    key = *hashed;
  }
  keys_[*identity] = key;
  // Another file with the same contents (a copy, another container's
  // layer) shares the table built first.
  if (auto id = ids_.find(key); id != ids_.end()) {
    Entry& entry = entries_[id->second];
    ++entry.references;
    ++stats_.shared;
    return Handle{id->second, entry.table, false};
  }
  ++stats_.built;
  stats_.build_time += table->build_time;
  uint32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = next_id_++;
  }
  Entry& entry = entries_[id];
  entry.key = key;
  entry.table = std::make_shared<const UnwindTable>(std::move(*table));
  entry.references = 1;
  ids_[key] = id;
  return Handle{id, entry.table, true};
}

bool UnwindTableCache::Release(uint32_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  if (--it->second.references > 0) return false;
  ids_.erase(it->second.key);
  entries_.erase(it);
  free_ids_.push_back(id);
  ++stats_.evicted;
  return true;
}

}  // namespace pystrobe

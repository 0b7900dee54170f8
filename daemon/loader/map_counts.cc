#include "daemon/loader/map_counts.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "bpf/pystrobe_abi.h"
#include "daemon/loader/libbpf_errors.h"
#include "pystrobe_map_counts.skel.h"

namespace pystrobe {

absl::StatusOr<std::unique_ptr<MapEntryCounter>> MapEntryCounter::Open() {
  pystrobe_map_counts* skeleton = pystrobe_map_counts__open_and_load();
  if (skeleton == nullptr) return LibbpfError(-errno, "load the map entry counter");
  bpf_link* link = bpf_program__attach_iter(skeleton->progs.count_map_entries, nullptr);
  if (link == nullptr) {
    int error = -errno;
    pystrobe_map_counts__destroy(skeleton);
    return LibbpfError(error, "attach the map entry counter");
  }
  return std::unique_ptr<MapEntryCounter>(new MapEntryCounter(skeleton, link));
}

MapEntryCounter::~MapEntryCounter() {
  bpf_link__destroy(link_);
  pystrobe_map_counts__destroy(skeleton_);
}

absl::StatusOr<absl::flat_hash_map<uint32_t, int64_t>> MapEntryCounter::Read() const {
  int fd = bpf_iter_create(bpf_link__fd(link_));
  if (fd < 0) return LibbpfError(-errno, "start counting the maps' entries");
  absl::flat_hash_map<uint32_t, int64_t> entries;
  // The records as a stream: a read may end inside one.
  uint8_t buffer[4096];
  size_t held = 0;
  for (;;) {
    ssize_t bytes = read(fd, buffer + held, sizeof(buffer) - held);
    if (bytes < 0 && errno == EINTR) continue;
    if (bytes < 0) {
      int error = -errno;
      close(fd);
      return LibbpfError(error, "count the maps' entries");
    }
    if (bytes == 0) break;
    held += static_cast<size_t>(bytes);
    size_t whole = held - held % sizeof(pystrobe_map_count);
    for (size_t at = 0; at < whole; at += sizeof(pystrobe_map_count)) {
      pystrobe_map_count count;
      std::memcpy(&count, buffer + at, sizeof(count));
      entries[count.map_id] = count.entries;
    }
    std::memmove(buffer, buffer + whole, held - whole);
    held -= whole;
  }
  close(fd);
  return entries;
}

uint32_t CountByWalkingKeys(int fd, size_t key_size, uint32_t most) {
  std::vector<uint8_t> key(key_size), next(key_size);
  const void* previous = nullptr;
  uint32_t entries = 0;
  while (entries <= most && bpf_map_get_next_key(fd, previous, next.data()) == 0) {
    ++entries;
    key.swap(next);
    previous = key.data();
  }
  return entries;
}

uint32_t MapIdOf(int fd) {
  bpf_map_info info{};
  uint32_t length = sizeof(info);
  return bpf_obj_get_info_by_fd(fd, &info, &length) == 0 ? info.id : 0;
}

}  // namespace pystrobe

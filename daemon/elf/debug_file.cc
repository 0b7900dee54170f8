#include "daemon/elf/debug_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace pystrobe {
namespace {

// A regular file's device and inode; nullopt when there is none at `path`.
std::optional<std::pair<dev_t, ino_t>> RegularFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return std::pair{st.st_dev, st.st_ino};
}

// The CRC-32 of the file at `path` (the zlib one, which .gnu_debuglink
// uses); nullopt when it cannot be read.
std::optional<uint32_t> FileCrc32(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return std::nullopt;
  }
  uLong crc = crc32(0, Z_NULL, 0);
  if (st.st_size == 0) {
    close(fd);
    return static_cast<uint32_t>(crc);
  }
  void* map = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return std::nullopt;
  // crc32 takes a uInt length: feed it in slices.
  const auto* bytes = static_cast<const Bytef*>(map);
  for (uint64_t done = 0, size = st.st_size; done < size;) {
    uInt slice = static_cast<uInt>(std::min<uint64_t>(size - done, uint64_t{1} << 30));
    crc = crc32(crc, bytes + done, slice);
    done += slice;
  }
  munmap(map, st.st_size);
  return static_cast<uint32_t>(crc);
}

}  // namespace

std::optional<std::string> FindDebugFile(const std::string& path, const ElfFile& file,
                                         const DebugFileSearch& search) {
  const std::string& build_id = file.build_id();
  if (build_id.size() > 2) {
    for (const std::string& dir : search.directories) {
      std::string candidate = absl::StrCat(dir, "/.build-id/", build_id.substr(0, 2), "/",
                                           build_id.substr(2), ".debug");
      if (RegularFile(candidate)) return candidate;
    }
  }
  const std::string& debuglink = file.debuglink();
  // A name with a slash would leave the folders searched.
  if (debuglink.empty() || debuglink.find('/') != std::string::npos) return std::nullopt;
  const std::string dir = path.substr(0, path.rfind('/') + 1);
  std::vector<std::string> candidates = {dir + debuglink, dir + ".debug/" + debuglink};
  for (const std::string& debug_dir : search.directories) {
    candidates.push_back(absl::StrCat(debug_dir, dir, debuglink));
  }
  const std::optional<std::pair<dev_t, ino_t>> itself = RegularFile(path);
  for (const std::string& candidate : candidates) {
    std::optional<std::pair<dev_t, ino_t>> found = RegularFile(candidate);
    if (!found || found == itself) continue;
    if (search.check_debuglink_crc && FileCrc32(candidate) != file.debuglink_crc()) continue;
    return candidate;
  }
  return std::nullopt;
}

}  // namespace pystrobe

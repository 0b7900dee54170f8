#include "daemon/unwind/unwind_table_disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pystrobe {
namespace {

// Bump when the layout or the meaning of a row changes: older files are
// then rejected (and replaced) instead of misread.
constexpr char kMagic[8] = {'P', 'S', 'U', 'N', 'W', 'T', '0', '2'};
constexpr char kSuffix[] = ".unwind";
// Far above any binary's (libtorch_cpu: 1.4M rows, 16 load segments).
constexpr uint64_t kMaxRows = uint64_t{1} << 28;
constexpr uint32_t kMaxSegments = 1024;
constexpr uint32_t kMaxText = 1 << 20;

struct Header {
  char magic[8];
  uint64_t rows;
  uint64_t fdes;
  uint64_t fdes_skipped;
  uint32_t segments;
  uint32_t build_id_size;
  uint32_t sources_size;
  uint32_t reserved;
  uint64_t checksum;  // of the whole file, this field zero
};
static_assert(sizeof(Header) == 56);

struct Segment {
  uint64_t vaddr, offset, file_size, mem_size, executable;
};

// 64-bit FNV-1a over 8-byte words: corruption shows, cheaply (17 MB in a
// few milliseconds). Not a defence against a forger: the checks of the
// contents are.
uint64_t Checksum(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    hash = (hash ^ word) * 0x100000001b3ull;
  }
  for (; i < bytes.size(); ++i) hash = (hash ^ static_cast<uint8_t>(bytes[i])) * 0x100000001b3ull;
  return hash;
}

template <typename T>
void Append(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

}  // namespace

std::string SerializeUnwindTable(const UnwindTable& table) {
  std::string sources = absl::StrJoin(table.sources, "\n");
  std::string body;
  body.reserve(table.build_id.size() + sources.size() +
               table.load_segments.size() * sizeof(Segment) +
               table.rows.size() * sizeof(pystrobe_unwind_row));
  body += table.build_id;
  body += sources;
  for (const ElfLoadSegment& s : table.load_segments) {
    Append(body, Segment{s.vaddr, s.offset, s.file_size, s.mem_size, s.executable ? 1u : 0u});
  }
  body.append(reinterpret_cast<const char*>(table.rows.data()),
              table.rows.size() * sizeof(pystrobe_unwind_row));
  Header header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.rows = table.rows.size();
  header.fdes = table.fdes;
  header.fdes_skipped = table.fdes_skipped;
  header.segments = static_cast<uint32_t>(table.load_segments.size());
  header.build_id_size = static_cast<uint32_t>(table.build_id.size());
  header.sources_size = static_cast<uint32_t>(sources.size());
  std::string out;
  out.reserve(sizeof(header) + body.size());
  Append(out, header);
  out += body;
  uint64_t checksum = Checksum(out);
  std::memcpy(out.data() + offsetof(Header, checksum), &checksum, sizeof(checksum));
  return out;
}

absl::StatusOr<UnwindTable> ParseUnwindTable(absl::string_view bytes) {
  Header header;
  if (bytes.size() < sizeof(header)) return absl::DataLossError("unwind cache: short file");
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError("unwind cache: not a table of this version");
  }
  if (header.rows == 0 || header.rows > kMaxRows || header.segments > kMaxSegments ||
      header.build_id_size > kMaxText || header.sources_size > kMaxText) {
    return absl::InvalidArgumentError("unwind cache: sizes out of range");
  }
  uint64_t expected = sizeof(header) + header.build_id_size + header.sources_size +
                      uint64_t{header.segments} * sizeof(Segment) +
                      header.rows * sizeof(pystrobe_unwind_row);
  if (bytes.size() != expected) return absl::DataLossError("unwind cache: size mismatch");
  std::string unsummed(bytes);
  std::memset(unsummed.data() + offsetof(Header, checksum), 0, sizeof(header.checksum));
  if (Checksum(unsummed) != header.checksum) {
    return absl::DataLossError("unwind cache: bad checksum");
  }
  absl::string_view body = bytes.substr(sizeof(header));

  UnwindTable table;
  size_t at = 0;
  table.build_id = std::string(body.substr(at, header.build_id_size));
  at += header.build_id_size;
  for (absl::string_view source :
       absl::StrSplit(body.substr(at, header.sources_size), '\n', absl::SkipEmpty())) {
    table.sources.push_back(std::string(source));
  }
  at += header.sources_size;
  for (uint32_t i = 0; i < header.segments; ++i, at += sizeof(Segment)) {
    Segment s;
    std::memcpy(&s, body.data() + at, sizeof(s));
    table.load_segments.push_back({s.vaddr, s.offset, s.file_size, s.mem_size, s.executable != 0});
  }
  table.rows.resize(header.rows);
  std::memcpy(table.rows.data(), body.data() + at, header.rows * sizeof(pystrobe_unwind_row));
  table.fdes = header.fdes;
  table.fdes_skipped = header.fdes_skipped;

  // What the kernel's walk relies on, checked row by row: a forged file can
  // at worst hold wrong rules, which the walk survives as it survives a
  // wrong binary (every read bounded, every step upward).
  if (!absl::c_all_of(table.build_id, absl::ascii_isxdigit)) {
    return absl::InvalidArgumentError("unwind cache: build id is not hex");
  }
  if (table.rows.front().addr & ((1u << PYSTROBE_UNWIND_PAGE_SHIFT) - 1)) {
    return absl::InvalidArgumentError("unwind cache: first row not at a page's start");
  }
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const pystrobe_unwind_row& row = table.rows[i];
    if (row.cfa_rule > PYSTROBE_UNWIND_CFA_END || row.rbp_rule > PYSTROBE_UNWIND_RBP_UNKNOWN) {
      return absl::InvalidArgumentError("unwind cache: unknown rule");
    }
    if (i > 0 && row.addr <= table.rows[i - 1].addr) {
      return absl::InvalidArgumentError("unwind cache: rows out of order");
    }
  }
  if (table.rows.back().cfa_rule != PYSTROBE_UNWIND_CFA_INVALID) {
    return absl::InvalidArgumentError("unwind cache: table not closed");
  }
  // The page index is derived, never read: it cannot disagree with the rows.
  IndexUnwindTablePages(table);
  return table;
}

absl::StatusOr<UnwindTableDiskCache> UnwindTableDiskCache::Open(std::string directory,
                                                                uint64_t max_bytes) {
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(directory).parent_path(), ignored);
  if (mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("create unwind cache ", directory, ": ", strerror(errno)));
  }
  struct stat st;
  if (lstat(directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(directory, " is not a directory"));
  }
  // Tables from a directory others can write would let them choose how
  // the kernel walks every process's stack.
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    return absl::FailedPreconditionError(
        absl::StrCat(directory, " must belong to uid ", geteuid(), " and be writable by it alone"));
  }
  return UnwindTableDiskCache(std::move(directory), max_bytes);
}

std::string UnwindTableDiskCache::PathOf(absl::string_view key) const {
  // Keys are "build-id:<hex>" or "hash:<hex>": only their hex reaches a
  // file name.
  std::string name;
  for (char c : key) {
    if (absl::ascii_isalnum(c) || c == '-') name += c;
    if (c == ':') name += '-';
  }
  return absl::StrCat(directory_, "/", name, kSuffix);
}

bool UnwindTableDiskCache::Contains(absl::string_view key) const {
  struct stat st;
  return lstat(PathOf(key).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<UnwindTable> UnwindTableDiskCache::Load(absl::string_view key) {
  std::string path = PathOf(key);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    ++stats_.misses;
    return std::nullopt;
  }
  struct stat st;
  std::string bytes;
  bool readable = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                  static_cast<uint64_t>(st.st_size) <= sizeof(Header) + kMaxRows * 16;
  if (readable) {
    bytes.resize(st.st_size);
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = pread(fd, bytes.data() + done, bytes.size() - done, done);
      if (n <= 0) break;
      done += n;
    }
    readable = done == bytes.size();
  }
  if (readable) futimens(fd, nullptr);  // read now: trimmed last
  close(fd);
  absl::StatusOr<UnwindTable> table =
      readable ? ParseUnwindTable(bytes) : absl::DataLossError("unreadable");
  if (!table.ok()) {
    ++stats_.rejected;
    unlink(path.c_str());
    return std::nullopt;
  }
  ++stats_.hits;
  return std::move(*table);
}

absl::Status UnwindTableDiskCache::Store(absl::string_view key, const UnwindTable& table) {
  std::string path = PathOf(key);
  std::string temporary = absl::StrCat(path, ".", getpid(), ".tmp");
  std::string bytes = SerializeUnwindTable(table);
  int fd = open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("write ", temporary, ": ", strerror(errno)));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += n;
  }
  close(fd);
  // Renamed whole or not at all: a reader never sees half a file.
  if (done != bytes.size() || rename(temporary.c_str(), path.c_str()) != 0) {
    unlink(temporary.c_str());
    return absl::UnavailableError(absl::StrCat("write ", path, ": ", strerror(errno)));
  }
  ++stats_.written;
  Trim();
  return absl::OkStatus();
}

void UnwindTableDiskCache::Trim() {
  struct File {
    std::string path;
    uint64_t bytes;
    int64_t mtime_ns;
  };
  std::vector<File> files;
  uint64_t total = 0;
  DIR* dir = opendir(directory_.c_str());
  if (dir == nullptr) return;
  while (dirent* entry = readdir(dir)) {
    absl::string_view name = entry->d_name;
    if (!absl::EndsWith(name, kSuffix)) continue;
    std::string path = absl::StrCat(directory_, "/", name);
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    files.push_back({path, static_cast<uint64_t>(st.st_size),
                     int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec});
    total += st.st_size;
  }
  closedir(dir);
  std::sort(files.begin(), files.end(),
            [](const File& a, const File& b) { return a.mtime_ns < b.mtime_ns; });
  for (const File& file : files) {
    if (total <= max_bytes_) break;
    if (unlink(file.path.c_str()) == 0) {
      total -= file.bytes;
      ++stats_.evicted;
    }
  }
}

}  // namespace pystrobe

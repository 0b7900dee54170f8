#include "daemon/loader/kernel_btf.h"

#include <fcntl.h>
#include <linux/btf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe {
namespace {

// A type's fixed part and, for a function prototype, its first two
// parameters: all that is asked of any type here.
constexpr size_t kTypeBytesKept = sizeof(btf_type) + 2 * sizeof(btf_param);
// Modifiers and typedefs followed before a type is judged, at most.
constexpr int kMaxResolveDepth = 32;

// One section of the file, read forward through one buffer.
class SectionReader {
 public:
  SectionReader(int fd, uint64_t start, uint64_t size) : fd_(fd), start_(start), size_(size) {}

  uint64_t position() const { return position_; }
  uint64_t remaining() const { return position_ < size_ ? size_ - position_ : 0; }
  bool at_end() const { return remaining() == 0; }

  // The bytes from the position on that are in the buffer: at least `wanted`
  // of them (refilling the buffer when fewer are), fewer only at the
  // section's end. Errors are read(2)'s.
  absl::StatusOr<absl::string_view> Peek(size_t wanted) {
    wanted = std::min<uint64_t>({wanted, sizeof(buffer_), size_ - position_});
    if (end_ - begin_ < wanted) {
      std::memmove(buffer_, buffer_ + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
      uint64_t file_position = start_ + position_ + end_;
      size_t room =
          static_cast<size_t>(std::min<uint64_t>(sizeof(buffer_) - end_, size_ - position_ - end_));
      while (room > 0) {
        ssize_t n = pread(fd_, buffer_ + end_, room, static_cast<off_t>(file_position));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return absl::ErrnoToStatus(errno, "read");
        if (n == 0) break;  // shorter than its header said: a short Peek
        end_ += static_cast<size_t>(n);
        file_position += static_cast<uint64_t>(n);
        room -= static_cast<size_t>(n);
      }
    }
    return absl::string_view(buffer_ + begin_, end_ - begin_);
  }

  void Skip(uint64_t bytes) {
    position_ += bytes;
    if (bytes <= end_ - begin_) {
      begin_ += static_cast<size_t>(bytes);
    } else {
      begin_ = end_ = 0;
    }
  }

 private:
  int fd_;
  uint64_t start_, size_;
  uint64_t position_ = 0;
  size_t begin_ = 0, end_ = 0;  // buffered bytes, position_ at begin_
  char buffer_[64 * 1024];
};

// How many bytes follow a type's fixed part, by its kind (the BTF format's
// own rule), or -1 for a kind this scanner does not know.
int64_t TrailingBytes(uint32_t kind, uint32_t vlen) {
  switch (kind) {
    case BTF_KIND_INT:
    case BTF_KIND_VAR:
    case BTF_KIND_DECL_TAG:
      return 4;
    case BTF_KIND_PTR:
    case BTF_KIND_FWD:
    case BTF_KIND_TYPEDEF:
    case BTF_KIND_VOLATILE:
    case BTF_KIND_CONST:
    case BTF_KIND_RESTRICT:
    case BTF_KIND_FUNC:
    case BTF_KIND_FLOAT:
    case BTF_KIND_TYPE_TAG:
      return 0;
    case BTF_KIND_ARRAY:
      return sizeof(btf_array);
    case BTF_KIND_STRUCT:
    case BTF_KIND_UNION:
      return int64_t{vlen} * sizeof(btf_member);
    case BTF_KIND_ENUM:
      return int64_t{vlen} * sizeof(btf_enum);
    case BTF_KIND_FUNC_PROTO:
      return int64_t{vlen} * sizeof(btf_param);
    case BTF_KIND_DATASEC:
      return int64_t{vlen} * sizeof(btf_var_secinfo);
    case 19:  // BTF_KIND_ENUM64, newer than some headers
      return int64_t{vlen} * 12;
    default:
      return -1;
  }
}

// The part of a type this scanner keeps (see kTypeBytesKept).
struct KeptType {
  btf_type type{};
  btf_param params[2]{};

  uint32_t kind() const { return BTF_INFO_KIND(type.info); }
  uint32_t vlen() const { return BTF_INFO_VLEN(type.info); }
  // Types that only qualify or rename the type they refer to.
  bool refers_on() const {
    switch (kind()) {
      case BTF_KIND_TYPEDEF:
      case BTF_KIND_VOLATILE:
      case BTF_KIND_CONST:
      case BTF_KIND_RESTRICT:
      case BTF_KIND_TYPE_TAG:
        return true;
      default:
        return false;
    }
  }
};

class KernelBtfScanner {
 public:
  KernelBtfScanner(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  absl::Status ReadHeader() {
    btf_header header;
    ssize_t n = pread(fd_, &header, sizeof(header), 0);
    if (n < 0) return procfs::FileError(path_, errno);
    if (static_cast<size_t>(n) < sizeof(header) || header.magic != BTF_MAGIC ||
        header.version != BTF_VERSION || header.hdr_len < sizeof(header)) {
      return Malformed("no BTF header of this machine's byte order");
    }
    types_ = {header.hdr_len + uint64_t{header.type_off}, header.type_len};
    strings_ = {header.hdr_len + uint64_t{header.str_off}, header.str_len};
    return absl::OkStatus();
  }

  // The offsets in the string section of each of `wanted` that it holds.
  absl::StatusOr<absl::flat_hash_map<uint32_t, std::string>> FindStrings(
      const std::vector<std::string>& wanted) {
    absl::flat_hash_map<uint32_t, std::string> found;
    SectionReader reader(fd_, strings_.start, strings_.size);
    while (!reader.at_end() && found.size() < wanted.size()) {
      absl::StatusOr<absl::string_view> bytes = reader.Peek(1);
      if (!bytes.ok()) return FileError(bytes.status());
      size_t end = bytes->find('\0');
      if (end == absl::string_view::npos) {
        bytes = reader.Peek(bytes->size() + 1);  // the rest of a string the buffer cut
        if (!bytes.ok()) return FileError(bytes.status());
        end = bytes->find('\0');
        if (end == absl::string_view::npos) {
          return Malformed(absl::StrCat("a string at offset ", reader.position(),
                                        " runs past 64 KiB or the section's end"));
        }
      }
      absl::string_view text = bytes->substr(0, end);
      if (std::find(wanted.begin(), wanted.end(), text) != wanted.end()) {
        found.emplace(static_cast<uint32_t>(reader.position()), std::string(text));
      }
      reader.Skip(end + 1);
    }
    return found;
  }

  // Walks every type, handing `visit` its id and kept part.
  absl::Status WalkTypes(absl::FunctionRef<void(uint32_t id, const KeptType& type)> visit) {
    SectionReader reader(fd_, types_.start, types_.size);
    for (uint32_t id = 1; !reader.at_end(); ++id) {
      absl::StatusOr<absl::string_view> bytes = reader.Peek(kTypeBytesKept);
      if (!bytes.ok()) return FileError(bytes.status());
      KeptType kept;
      if (bytes->size() < sizeof(btf_type)) {
        return Malformed(absl::StrCat("type ", id, " is cut short"));
      }
      std::memcpy(&kept, bytes->data(), std::min(bytes->size(), sizeof(kept)));
      int64_t trailing = TrailingBytes(kept.kind(), kept.vlen());
      if (trailing < 0) {
        return Malformed(absl::StrCat("type ", id, " is of unknown kind ", kept.kind()));
      }
      uint64_t size = sizeof(btf_type) + static_cast<uint64_t>(trailing);
      if (size > reader.remaining()) {
        return Malformed(absl::StrCat("type ", id, " runs past the type section"));
      }
      visit(id, kept);
      reader.Skip(size);
    }
    return absl::OkStatus();
  }

  // The types of `ids`, in one walk.
  absl::StatusOr<absl::flat_hash_map<uint32_t, KeptType>> TypesOf(
      const absl::flat_hash_set<uint32_t>& ids) {
    absl::flat_hash_map<uint32_t, KeptType> out;
    absl::Status walked = WalkTypes([&](uint32_t id, const KeptType& type) {
      if (ids.contains(id)) out.emplace(id, type);
    });
    if (!walked.ok()) return walked;
    return out;
  }

 private:
  struct Section {
    uint64_t start = 0, size = 0;
  };

  absl::Status Malformed(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ", what));
  }
  absl::Status FileError(const absl::Status& read) const {
    return absl::Status(read.code(), absl::StrCat(path_, ": ", read.message()));
  }

  std::string path_;
  int fd_;
  Section types_, strings_;
};

}  // namespace

absl::StatusOr<std::map<std::string, RawTracepointParams>> ReadRawTracepointParams(
    const std::string& btf_path, const std::vector<std::string>& names) {
  int fd = open(btf_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return procfs::FileError(btf_path, errno);
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  KernelBtfScanner scanner(btf_path, fd);
  if (absl::Status s = scanner.ReadHeader(); !s.ok()) return s;

  std::vector<std::string> typedef_names;
  for (const std::string& name : names) typedef_names.push_back("btf_trace_" + name);
  absl::StatusOr<absl::flat_hash_map<uint32_t, std::string>> strings =
      scanner.FindStrings(typedef_names);
  if (!strings.ok()) return strings.status();

  // Each name's chain of types, one walk of the type section per step:
  // btf_trace_<name> (a typedef) -> a pointer -> a function prototype, and
  // for the first parameter after the context, whatever it resolves to.
  struct Chain {
    std::string name;
    uint32_t at = 0;  // the type to fetch next
    int depth = 0;
    bool in_params = false;  // past the prototype: resolving its parameter
    RawTracepointParams params;
    bool done = false, failed = false;
  };
  std::vector<Chain> chains;
  absl::Status walked = scanner.WalkTypes([&](uint32_t, const KeptType& type) {
    if (type.kind() != BTF_KIND_TYPEDEF) return;
    auto it = strings->find(type.type.name_off);
    if (it == strings->end()) return;
    Chain chain;
    chain.name = it->second.substr(std::strlen("btf_trace_"));
    chain.at = type.type.type;
    chains.push_back(std::move(chain));
  });
  if (!walked.ok()) return walked;

  while (true) {
    absl::flat_hash_set<uint32_t> wanted;
    for (Chain& chain : chains) {
      if (!chain.done && chain.in_params && chain.at == 0) chain.done = true;  // void
      if (!chain.done) wanted.insert(chain.at);
    }
    if (wanted.empty()) break;
    absl::StatusOr<absl::flat_hash_map<uint32_t, KeptType>> types = scanner.TypesOf(wanted);
    if (!types.ok()) return types.status();
    for (Chain& chain : chains) {
      if (chain.done) continue;
      auto it = types->find(chain.at);
      if (it == types->end() || ++chain.depth > kMaxResolveDepth) {
        chain.done = chain.failed = true;  // a dangling id, or a loop
        continue;
      }
      const KeptType& type = it->second;
      if (type.refers_on()) {
        chain.at = type.type.type;
      } else if (chain.in_params) {
        chain.params.first_is_pointer = type.kind() == BTF_KIND_PTR;
        chain.done = true;
      } else if (type.kind() == BTF_KIND_PTR) {
        chain.at = type.type.type;
      } else if (type.kind() == BTF_KIND_FUNC_PROTO) {
        chain.params.count = static_cast<int>(type.vlen());
        chain.in_params = chain.params.count >= 2;
        chain.done = !chain.in_params;
        chain.at = type.params[1].type;
      } else {
        chain.done = chain.failed = true;
      }
    }
  }
  std::map<std::string, RawTracepointParams> out;
  for (const Chain& chain : chains) {
    if (!chain.failed) out.emplace(chain.name, chain.params);
  }
  return out;
}

}  // namespace pystrobe

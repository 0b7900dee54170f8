#include "daemon/control/control_protocol.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pystrobe {
namespace {

// Debian's abseil has its own string_view.
absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// The profile encoding, versioned: 2 added native modules (path, build id,
// segments) and each native frame's module and file offset.
constexpr char kProfileMagic[] = "PSPF3";
// The top snapshot encoding, versioned: 2 added resident memory per process
// row and of a pid's process; 3 a row's flags byte (exited, free-threaded).
constexpr char kTopMagic[] = "PSTP3";
constexpr uint8_t kRowExited = 1 << 0;
constexpr uint8_t kRowFreeThreaded = 1 << 1;
constexpr size_t kMaxTopCounterFields = 256;

void PutU16(std::string& out, uint16_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void PutString(std::string& out, std::string_view s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

uint64_t GetLE(std::string_view bytes, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return v;
}

// Reads the profile encoding, every read checked against what is left.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : rest_(bytes) {}
  bool U32(uint32_t& v) { return Fixed(4, v); }
  bool U64(uint64_t& v) { return Fixed(8, v); }
  bool U8(uint8_t& v) { return Fixed(1, v); }
  bool String(std::string& s) {
    uint32_t n = 0;
    if (!U32(n) || n > rest_.size()) return false;
    s.assign(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return true;
  }
  // A count of items of at least `min_item_bytes` each: no more than fit.
  bool Count(uint32_t& n, size_t min_item_bytes) {
    return U32(n) && static_cast<uint64_t>(n) * min_item_bytes <= rest_.size();
  }
  bool empty() const { return rest_.empty(); }

 private:
  template <typename T>
  bool Fixed(size_t width, T& v) {
    if (rest_.size() < width) return false;
    v = static_cast<T>(GetLE(rest_, width));
    rest_.remove_prefix(width);
    return true;
  }
  std::string_view rest_;
};

absl::Status Bad(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("bad request: ", A(what)));
}

absl::StatusOr<bool> ParseFlag(std::string_view key, std::string_view value) {
  if (value == "1") return true;
  if (value == "0") return false;
  return Bad(absl::StrCat(A(key), " must be 0 or 1"));
}

// Splits a request payload into its key=value pairs: printable text, every
// line with '=', no key twice.
absl::StatusOr<std::vector<std::pair<std::string_view, std::string_view>>> KeyValues(
    std::string_view payload) {
  if (payload.size() > kMaxRequestPayload) return Bad("request too long");
  for (char c : payload) {
    if (c != '\n' &&
        (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e)) {
      return Bad("the payload is not printable text");
    }
  }
  std::vector<std::pair<std::string_view, std::string_view>> out;
  std::set<std::string, std::less<>> seen;
  for (absl::string_view line_text : absl::StrSplit(A(payload), '\n', absl::SkipEmpty())) {
    std::string_view line(line_text.data(), line_text.size());
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) return Bad("a line without '='");
    std::string_view key = line.substr(0, eq);
    if (!seen.insert(std::string(key)).second) return Bad(absl::StrCat("repeated key ", A(key)));
    out.emplace_back(key, line.substr(eq + 1));
  }
  return out;
}

absl::StatusOr<uint32_t> ParsePid(std::string_view key, std::string_view value) {
  uint32_t pid = 0;
  if (!absl::SimpleAtoi(A(value), &pid) || pid == 0 || pid > (1u << 22)) {
    return Bad(absl::StrCat(A(key), ": not a pid"));
  }
  return pid;
}

// Milliseconds in [min, max].
absl::StatusOr<absl::Duration> ParseMillis(std::string_view key, std::string_view value,
                                           absl::Duration min, absl::Duration max) {
  int64_t ms = 0;
  if (!absl::SimpleAtoi(A(value), &ms) || absl::Milliseconds(ms) < min ||
      absl::Milliseconds(ms) > max) {
    return Bad(absl::StrCat(A(key), ": out of range (", absl::FormatDuration(min), " to ",
                            absl::FormatDuration(max), ")"));
  }
  return absl::Milliseconds(ms);
}

}  // namespace

std::string EncodeHeader(const ControlHeader& header) {
  std::string out;
  PutU32(out, header.magic);
  PutU16(out, header.version);
  PutU16(out, header.type);
  PutU32(out, header.length);
  PutU32(out, header.reserved);
  return out;
}

absl::StatusOr<ControlHeader> ParseHeader(std::string_view bytes, uint32_t max_payload) {
  if (bytes.size() < kControlHeaderSize) return Bad("truncated header");
  ControlHeader header;
  header.magic = static_cast<uint32_t>(GetLE(bytes, 4));
  header.version = static_cast<uint16_t>(GetLE(bytes.substr(4), 2));
  header.type = static_cast<uint16_t>(GetLE(bytes.substr(6), 2));
  header.length = static_cast<uint32_t>(GetLE(bytes.substr(8), 4));
  header.reserved = static_cast<uint32_t>(GetLE(bytes.substr(12), 4));
  if (header.magic != kControlMagic) return Bad("not a pystrobe control message (bad magic)");
  if (header.version != kControlVersion) {
    return Bad(absl::StrCat("protocol version ", header.version, ", this daemon speaks ",
                            kControlVersion));
  }
  if (header.reserved != 0) return Bad("reserved header field is not 0");
  if (header.length > max_payload) {
    return Bad(absl::StrCat("payload of ", header.length, " bytes, at most ", max_payload));
  }
  return header;
}

std::string EncodeFrame(ControlMessageType type, std::string_view payload) {
  ControlHeader header;
  header.type = static_cast<uint16_t>(type);
  header.length = static_cast<uint32_t>(payload.size());
  std::string out = EncodeHeader(header);
  out.append(payload);
  return out;
}

bool SendFrame(int fd, ControlMessageType type, std::string_view payload) {
  const std::string frame = EncodeFrame(type, payload);
  std::string_view rest = frame;
  while (!rest.empty()) {
    ssize_t n = send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    rest.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string EncodeRecordRequest(const RecordRequest& r) { return RecordFlags().EncodeWire(r); }

absl::StatusOr<RecordRequest> ParseRecordRequest(std::string_view payload) {
  absl::StatusOr<std::vector<std::pair<std::string_view, std::string_view>>> pairs =
      KeyValues(payload);
  if (!pairs.ok()) return pairs.status();
  RecordRequest r;
  for (const auto& [key, value] : *pairs) {
    if (absl::Status s = RecordFlags().DecodeWire(A(key), A(value), r); !s.ok()) {
      return Bad(std::string(s.message()));
    }
  }
  if (r.all == !r.pids.empty()) return Bad("exactly one of pids and all is needed");
  // The checks a command line passes: a request no client would send is
  // refused as the client would refuse it.
  if (absl::Status s = CheckRecordOptions(r, {}); !s.ok()) return Bad(std::string(s.message()));
  return r;
}

std::string EncodeStatRequest(const StatRequest& r) {
  return absl::StrCat("pid=", r.pid, "\nduration_ms=", absl::ToInt64Milliseconds(r.duration),
                      "\njson=", r.json ? 1 : 0, "\n");
}

absl::StatusOr<StatRequest> ParseStatRequest(std::string_view payload) {
  absl::StatusOr<std::vector<std::pair<std::string_view, std::string_view>>> pairs =
      KeyValues(payload);
  if (!pairs.ok()) return pairs.status();
  StatRequest r;
  bool has_pid = false, has_duration = false;
  for (const auto& [key, value] : *pairs) {
    if (key == "pid") {
      absl::StatusOr<uint32_t> pid = ParsePid(key, value);
      if (!pid.ok()) return pid.status();
      r.pid = *pid;
      has_pid = true;
    } else if (key == "duration_ms") {
      absl::StatusOr<absl::Duration> d =
          ParseMillis(key, value, absl::Milliseconds(1), kMaxRemoteRecording);
      if (!d.ok()) return d.status();
      r.duration = *d;
      has_duration = true;
    } else if (key == "json") {
      absl::StatusOr<bool> flag = ParseFlag(key, value);
      if (!flag.ok()) return flag.status();
      r.json = *flag;
    } else {
      return Bad(absl::StrCat("unknown key ", A(key)));
    }
  }
  if (!has_pid || !has_duration) return Bad("stat needs pid and duration_ms");
  return r;
}

std::string EncodeTopRequest(const TopRequest& r) {
  std::string out = absl::StrCat("interval_ms=", absl::ToInt64Milliseconds(r.interval), "\n");
  if (r.pid) absl::StrAppend(&out, "pid=", *r.pid, "\n");
  return out;
}

absl::StatusOr<TopRequest> ParseTopRequest(std::string_view payload) {
  absl::StatusOr<std::vector<std::pair<std::string_view, std::string_view>>> pairs =
      KeyValues(payload);
  if (!pairs.ok()) return pairs.status();
  TopRequest r;
  bool has_interval = false;
  for (const auto& [key, value] : *pairs) {
    if (key == "pid") {
      absl::StatusOr<uint32_t> pid = ParsePid(key, value);
      if (!pid.ok()) return pid.status();
      r.pid = *pid;
    } else if (key == "interval_ms") {
      absl::StatusOr<absl::Duration> d = ParseMillis(key, value, kMinTopInterval, kMaxTopInterval);
      if (!d.ok()) return d.status();
      r.interval = *d;
      has_interval = true;
    } else {
      return Bad(absl::StrCat("unknown key ", A(key)));
    }
  }
  if (!has_interval) return Bad("top needs interval_ms");
  return r;
}

std::string EncodeTopSnapshot(const TopSnapshot& s) {
  std::string out(kTopMagic);
  PutString(out, s.title);
  uint64_t interval_bits = 0;
  static_assert(sizeof(double) == sizeof(uint64_t));
  std::memcpy(&interval_bits, &s.interval_seconds, sizeof(interval_bits));
  PutU64(out, interval_bits);
  PutU32(out, s.cpus);
  PutU64(out, s.function_samples);
  PutU32(out, static_cast<uint32_t>(s.rows.size()));
  for (const TopSnapshotRow& row : s.rows) {
    PutU32(out, row.pid);
    PutU32(out, row.tid);
    PutString(out, row.comm);
    out.push_back((row.exited ? kRowExited : 0) | (row.free_threaded ? kRowFreeThreaded : 0));
    PutU32(out, static_cast<uint32_t>(row.counters.size()));
    for (uint64_t v : row.counters) PutU64(out, v);
    out.push_back(row.rss_known ? 1 : 0);
    PutU64(out, row.rss_bytes);
  }
  PutU32(out, static_cast<uint32_t>(s.functions.size()));
  for (const TopSnapshotFunction& fn : s.functions) {
    PutString(out, fn.name);
    PutU64(out, fn.samples);
  }
  out.push_back(s.process_rss_known ? 1 : 0);
  PutU64(out, s.process_rss_bytes);
  if (!s.gpu) return out;
  auto put_double = [&out](double value) {
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(bits));
    PutU64(out, bits);
  };
  PutU32(out, static_cast<uint32_t>(s.gpu_devices.size()));
  for (const TopSnapshotGpuDevice& d : s.gpu_devices) {
    PutU32(out, d.index);
    PutString(out, d.name);
    put_double(d.utilization);
    PutU64(out, d.memory_used_bytes);
    PutU64(out, d.memory_total_bytes);
  }
  PutU32(out, static_cast<uint32_t>(s.gpu_processes.size()));
  for (const TopSnapshotGpuProcess& p : s.gpu_processes) {
    PutU32(out, p.pid);
    put_double(p.utilization);
    PutU64(out, p.memory_bytes);
  }
  return out;
}

absl::StatusOr<TopSnapshot> DecodeTopSnapshot(std::string_view bytes, size_t counter_fields) {
  auto bad = [] { return absl::DataLossError("the daemon's top snapshot is malformed"); };
  std::string_view magic(kTopMagic);
  if (bytes.substr(0, magic.size()) != magic || counter_fields > kMaxTopCounterFields) {
    return bad();
  }
  Reader in(bytes.substr(magic.size()));
  TopSnapshot s;
  uint64_t interval_bits = 0;
  uint32_t n = 0;
  if (!in.String(s.title) || !in.U64(interval_bits) || !in.U32(s.cpus) ||
      !in.U64(s.function_samples) || !in.Count(n, 26)) {
    return bad();
  }
  std::memcpy(&s.interval_seconds, &interval_bits, sizeof(interval_bits));
  if (!(s.interval_seconds >= 0 && s.interval_seconds <= 3600)) return bad();
  for (uint32_t i = 0; i < n; ++i) {
    TopSnapshotRow row;
    uint8_t flags = 0;
    uint32_t fields = 0;
    if (!in.U32(row.pid) || !in.U32(row.tid) || !in.String(row.comm) || !in.U8(flags) ||
        (flags & ~(kRowExited | kRowFreeThreaded)) != 0 || !in.Count(fields, 8) ||
        fields != counter_fields) {
      return bad();
    }
    row.exited = (flags & kRowExited) != 0;
    row.free_threaded = (flags & kRowFreeThreaded) != 0;
    row.counters.resize(fields);
    for (uint64_t& v : row.counters) {
      if (!in.U64(v)) return bad();
    }
    uint8_t rss_known = 0;
    if (!in.U8(rss_known) || rss_known > 1 || !in.U64(row.rss_bytes)) return bad();
    row.rss_known = rss_known == 1;
    s.rows.push_back(std::move(row));
  }
  if (!in.Count(n, 12)) return bad();
  for (uint32_t i = 0; i < n; ++i) {
    TopSnapshotFunction fn;
    if (!in.String(fn.name) || !in.U64(fn.samples)) return bad();
    s.functions.push_back(std::move(fn));
  }
  uint8_t process_rss_known = 0;
  if (!in.U8(process_rss_known) || process_rss_known > 1 || !in.U64(s.process_rss_bytes)) {
    return bad();
  }
  s.process_rss_known = process_rss_known == 1;
  if (in.empty()) return s;
  // The GPU section: utilizations are shares, at most a GPU each.
  auto get_share = [&in](double& value, double most) {
    uint64_t bits = 0;
    if (!in.U64(bits)) return false;
    std::memcpy(&value, &bits, sizeof(value));
    return value >= 0 && value <= most;
  };
  s.gpu = true;
  if (!in.Count(n, 32)) return bad();
  for (uint32_t i = 0; i < n; ++i) {
    TopSnapshotGpuDevice d;
    if (!in.U32(d.index) || !in.String(d.name) || !get_share(d.utilization, 1) ||
        !in.U64(d.memory_used_bytes) || !in.U64(d.memory_total_bytes)) {
      return bad();
    }
    s.gpu_devices.push_back(std::move(d));
  }
  if (!in.Count(n, 20)) return bad();
  for (uint32_t i = 0; i < n; ++i) {
    TopSnapshotGpuProcess p;
    if (!in.U32(p.pid) || !get_share(p.utilization, 64) || !in.U64(p.memory_bytes)) return bad();
    s.gpu_processes.push_back(p);
  }
  if (!in.empty()) return bad();
  return s;
}

absl::StatusOr<ParsedRequest> ParseRequestFrame(std::string_view frame) {
  absl::StatusOr<ControlHeader> header = ParseHeader(frame, kMaxRequestPayload);
  if (!header.ok()) return header.status();
  std::string_view payload = frame.substr(kControlHeaderSize);
  if (payload.size() < header->length) return Bad("truncated payload");
  if (payload.size() > header->length) return Bad("bytes after the payload");
  ParsedRequest parsed;
  switch (static_cast<ControlMessageType>(header->type)) {
    case ControlMessageType::kRecord: {
      absl::StatusOr<RecordRequest> record = ParseRecordRequest(payload);
      if (!record.ok()) return record.status();
      parsed.type = ControlMessageType::kRecord;
      parsed.record = std::move(*record);
      return parsed;
    }
    case ControlMessageType::kStat: {
      absl::StatusOr<StatRequest> stat = ParseStatRequest(payload);
      if (!stat.ok()) return stat.status();
      parsed.type = ControlMessageType::kStat;
      parsed.stat = *stat;
      return parsed;
    }
    case ControlMessageType::kTop: {
      absl::StatusOr<TopRequest> top = ParseTopRequest(payload);
      if (!top.ok()) return top.status();
      parsed.type = ControlMessageType::kTop;
      parsed.top = *top;
      return parsed;
    }
    default:
      return Bad(absl::StrCat("unknown request type ", header->type));
  }
}

std::string EncodeProfile(const Profile& profile) {
  std::string out(kProfileMagic);
  PutString(out, profile.title);
  PutString(out, profile.count_unit);
  PutU32(out, static_cast<uint32_t>(profile.sample_rate_hz));
  PutU64(out,
         profile.start_time ? static_cast<uint64_t>(absl::ToUnixNanos(*profile.start_time)) : 0);
  PutU64(out,
         profile.duration ? static_cast<uint64_t>(absl::ToInt64Nanoseconds(*profile.duration)) : 0);
  PutU32(out, static_cast<uint32_t>(profile.labels.size()));
  for (const ProfileLabel& label : profile.labels) {
    PutString(out, label.key);
    PutString(out, label.value);
  }
  PutU32(out, static_cast<uint32_t>(profile.process_labels.size()));
  for (const auto& [pid, labels] : profile.process_labels) {
    PutU32(out, pid);
    PutU32(out, static_cast<uint32_t>(labels.size()));
    for (const ProfileLabel& label : labels) {
      PutString(out, label.key);
      PutString(out, label.value);
    }
  }
  // The modules frames refer to, once each; a frame names one by its index
  // plus one (0: none).
  absl::flat_hash_map<const NativeModule*, uint32_t> module_index;
  std::vector<const NativeModule*> modules;
  for (const ProfileStack& stack : profile.stacks()) {
    for (const Frame& frame : stack.frames) {
      if (frame.module == nullptr) continue;
      auto [it, inserted] = module_index.try_emplace(frame.module.get(), modules.size() + 1);
      if (inserted) modules.push_back(frame.module.get());
    }
  }
  PutU32(out, static_cast<uint32_t>(modules.size()));
  for (const NativeModule* module : modules) {
    PutString(out, module->path);
    PutString(out, module->build_id);
    PutU32(out, static_cast<uint32_t>(module->code_segments.size()));
    for (const NativeModule::Segment& segment : module->code_segments) {
      PutU64(out, segment.vaddr);
      PutU64(out, segment.size);
      PutU64(out, segment.file_offset);
    }
  }
  PutU32(out, static_cast<uint32_t>(profile.stacks().size()));
  for (const ProfileStack& stack : profile.stacks()) {
    PutU64(out, stack.count);
    PutU64(out, stack.nanoseconds);
    PutU32(out, static_cast<uint32_t>(stack.frames.size()));
    for (const Frame& frame : stack.frames) {
      out.push_back(static_cast<char>(frame.kind));
      PutString(out, frame.name);
      uint32_t module = frame.module != nullptr ? module_index.at(frame.module.get()) : 0;
      PutU32(out, module);
      if (module != 0) PutU64(out, frame.file_offset);
    }
  }
  return out;
}

absl::StatusOr<Profile> DecodeProfile(std::string_view bytes) {
  auto bad = [] { return absl::DataLossError("the daemon's profile is malformed"); };
  std::string_view magic(kProfileMagic);
  if (bytes.substr(0, magic.size()) != magic) {
    // "PSPF" and another version: a daemon of another pystrobe release.
    if (bytes.substr(0, 4) == magic.substr(0, 4) && bytes.size() >= magic.size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the daemon sent profile encoding ", A(bytes.substr(0, magic.size())),
                       ", this pystrobe reads ", kProfileMagic,
                       ": restart the daemon after upgrading pystrobe"));
    }
    return bad();
  }
  Reader in(bytes.substr(magic.size()));
  Profile profile;
  uint32_t rate = 0, n = 0;
  uint64_t start = 0, duration = 0;
  if (!in.String(profile.title) || !in.String(profile.count_unit) || !in.U32(rate) ||
      !in.U64(start) || !in.U64(duration)) {
    return bad();
  }
  profile.sample_rate_hz = static_cast<int>(rate);
  if (start != 0) profile.start_time = absl::FromUnixNanos(static_cast<int64_t>(start));
  if (duration != 0) profile.duration = absl::Nanoseconds(static_cast<int64_t>(duration));
  if (!in.Count(n, 8)) return bad();
  for (uint32_t i = 0; i < n; ++i) {
    ProfileLabel label;
    if (!in.String(label.key) || !in.String(label.value)) return bad();
    profile.labels.push_back(std::move(label));
  }
  if (!in.Count(n, 8)) return bad();
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t pid = 0, count = 0;
    if (!in.U32(pid) || !in.Count(count, 8)) return bad();
    std::vector<ProfileLabel>& labels = profile.process_labels[pid];
    for (uint32_t j = 0; j < count; ++j) {
      ProfileLabel label;
      if (!in.String(label.key) || !in.String(label.value)) return bad();
      labels.push_back(std::move(label));
    }
  }
  // Path, build id and segment count: 12 bytes at least.
  if (!in.Count(n, 12)) return bad();
  std::vector<std::shared_ptr<const NativeModule>> modules;
  modules.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    auto module = std::make_shared<NativeModule>();
    uint32_t segments = 0;
    if (!in.String(module->path) || !in.String(module->build_id) || !in.Count(segments, 24)) {
      return bad();
    }
    module->code_segments.resize(segments);
    for (NativeModule::Segment& segment : module->code_segments) {
      if (!in.U64(segment.vaddr) || !in.U64(segment.size) || !in.U64(segment.file_offset)) {
        return bad();
      }
    }
    modules.push_back(std::move(module));
  }
  if (!in.Count(n, 12)) return bad();
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t count = 0, nanoseconds = 0;
    uint32_t frames = 0;
    // Kind, name length and module: 9 bytes at least.
    if (!in.U64(count) || !in.U64(nanoseconds) || !in.Count(frames, 9)) return bad();
    std::vector<Frame> stack(frames);
    for (Frame& frame : stack) {
      uint8_t kind = 0;
      uint32_t module = 0;
      if (!in.U8(kind) || kind > static_cast<uint8_t>(FrameKind::kMarker) ||
          !in.String(frame.name) || !in.U32(module) || module > modules.size()) {
        return bad();
      }
      frame.kind = static_cast<FrameKind>(kind);
      if (module != 0) {
        frame.module = modules[module - 1];
        if (!in.U64(frame.file_offset)) return bad();
      }
    }
    profile.Add(std::move(stack), count, nanoseconds);
  }
  if (!in.empty()) return bad();
  return profile;
}

}  // namespace pystrobe

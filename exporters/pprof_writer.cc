#include "exporters/pprof_writer.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "model/frame_names.h"

namespace pystrobe {
namespace {

namespace pb = ::perftools::profiles;

// The roots record --off-cpu puts above the process frame
// (daemon/cli/record_command.cc).
constexpr std::string_view kOnCpuRoot = "[on-cpu]";
constexpr std::string_view kOffCpuRoot = "[off-cpu]";
// The one mapping every kernel frame belongs to.
constexpr std::string_view kKernelMapping = "[kernel]";
// A stack with no frame that becomes a location still gets one, as in the
// folded format, so its samples stay visible.
constexpr std::string_view kUnknownFrame = "[unknown]";

constexpr double kNanosPerSecond = 1e9;
constexpr int64_t kNanosPerMicro = 1000;

// Which of an off-CPU profile's parts a stack belongs to.
enum class CpuState { kUnknown, kOnCpu, kOffCpu };

// The sample types of one profile, and how a stack's count becomes values.
struct ValueLayout {
  struct Type {
    std::string_view type;
    std::string_view unit;
  };
  std::vector<Type> types;
  std::string_view default_type;
  Type period_type;
  int64_t period = 0;
  bool weighted_by_state = false;  // the wall/cpu/off_cpu layout
  double nanos_per_count = 0;      // samples -> cpu nanoseconds; 0 without a rate

  static ValueLayout For(const Profile& profile) {
    ValueLayout layout;
    double period = profile.sample_rate_hz > 0 ? kNanosPerSecond / profile.sample_rate_hz : 0;
    if (profile.count_unit == "microseconds") {
      layout.types = {{"wall", "nanoseconds"}, {"cpu", "nanoseconds"}, {"off_cpu", "nanoseconds"}};
      layout.default_type = "wall";
      layout.period_type = {"wall", "nanoseconds"};
      layout.period = std::llround(period);
      layout.weighted_by_state = true;
    } else if (profile.count_unit == "inuse_bytes" || profile.count_unit == "alloc_bytes") {
      // Sampled allocations: held at the end, or all (Go's and Pyroscope's names).
      std::string_view type = profile.count_unit == "inuse_bytes" ? "inuse_space" : "alloc_space";
      layout.types = {{type, "bytes"}};
      layout.default_type = type;
      layout.period_type = {"space", "bytes"};
      layout.period = static_cast<int64_t>(profile.sampling_interval_bytes);
    } else if (profile.count_unit == "bytes") {
      // Resident growth, sampled every sampling_interval_bytes on average.
      layout.types = {{"resident_growth", "bytes"}};
      layout.default_type = "resident_growth";
      layout.period_type = {"space", "bytes"};
      layout.period = static_cast<int64_t>(profile.sampling_interval_bytes);
    } else if (profile.count_unit == "samples" && profile.sample_rate_hz > 0) {
      layout.types = {{"samples", "count"}, {"cpu", "nanoseconds"}};
      layout.default_type = "cpu";
      layout.period_type = {"cpu", "nanoseconds"};
      layout.period = std::llround(period);
      layout.nanos_per_count = period;
    } else {
      // No rate to turn samples into time, or a unit this writer does not
      // know: the counts as they are.
      std::string_view unit = profile.count_unit.empty() ? std::string_view("samples")
                                                         : std::string_view(profile.count_unit);
      layout.types = {{unit, "count"}};
      layout.default_type = unit;
      layout.period_type = {unit, "count"};
      layout.period = 1;
    }
    return layout;
  }

  // A stack's values. Time is the time its samples stand for where the
  // profile knows it (each sample's interval on its CPU, or its time off
  // CPU), else the count at the mean period.
  void Values(const ProfileStack& stack, CpuState state, pb::Sample& sample) const {
    int64_t n = static_cast<int64_t>(stack.count);
    if (weighted_by_state) {
      int64_t nanos =
          stack.nanoseconds > 0 ? static_cast<int64_t>(stack.nanoseconds) : n * kNanosPerMicro;
      sample.add_value(nanos);
      sample.add_value(state == CpuState::kOnCpu ? nanos : 0);
      sample.add_value(state == CpuState::kOffCpu ? nanos : 0);
    } else if (nanos_per_count > 0) {
      sample.add_value(n);
      sample.add_value(stack.nanoseconds > 0
                           ? static_cast<int64_t>(stack.nanoseconds)
                           : std::llround(static_cast<double>(n) * nanos_per_count));
    } else {
      sample.add_value(n);
    }
  }
};

class PprofBuilder {
 public:
  explicit PprofBuilder(pb::Profile& out) : out_(out) { String(""); }

  int64_t String(std::string_view s) {
    auto [it, inserted] = strings_.try_emplace(std::string(s), out_.string_table_size());
    if (inserted) out_.add_string_table(std::string(s));
    return it->second;
  }

  void AddValueType(pb::ValueType* type, const ValueLayout::Type& t) {
    type->set_type(String(t.type));
    type->set_unit(String(t.unit));
  }

  void AddLabel(pb::Sample& sample, std::string_view key, std::string_view value) {
    pb::Label* label = sample.add_label();
    label->set_key(String(key));
    label->set_str(String(value));
  }

  void AddLabel(pb::Sample& sample, std::string_view key, int64_t value) {
    pb::Label* label = sample.add_label();
    label->set_key(String(key));
    label->set_num(value);
  }

  // The location of a frame that is not a process or thread frame.
  uint64_t LocationOf(const Frame& frame) {
    // Where the code lies, for native frames: a mapping and an address in it.
    pb::Mapping* mapping = nullptr;
    uint64_t address = 0;
    bool unsymbolized = false;
    if (frame.kind == FrameKind::kNative) {
      std::optional<ModuleOffsetFrameName> module_offset = ParseModuleOffsetFrameName(frame.name);
      unsymbolized = module_offset.has_value();
      if (frame.module != nullptr) {
        std::tie(mapping, address) = MappingOf(*frame.module, frame.file_offset);
      } else if (module_offset) {
        // Named elsewhere, without the module (BCC's symbolizer): the base
        // name and the file offset are all there is.
        NativeModule module;
        module.path = std::string(module_offset->module);
        std::tie(mapping, address) = MappingOf(module, module_offset->offset);
      }
    } else if (frame.kind == FrameKind::kKernel) {
      mapping = &MappingOf(kKernelMapping, frame.module != nullptr ? frame.module->build_id : "");
    }

    std::string key = absl::StrCat(static_cast<int>(frame.kind), ":", frame.name);
    if (mapping != nullptr && frame.kind == FrameKind::kNative) {
      absl::StrAppend(&key, "@", mapping->id(), ":", address);
    }
    auto [it, inserted] = location_ids_.try_emplace(std::move(key), 0);
    if (!inserted) return it->second;
    pb::Location* location = out_.add_location();
    location->set_id(out_.location_size());
    it->second = location->id();
    if (mapping != nullptr) {
      location->set_mapping_id(mapping->id());
      location->set_address(address);
      // A reader may symbolize a mapping whose functions are not all known.
      if (unsymbolized) mapping->set_has_functions(false);
    }
    pb::Line* line = location->add_line();
    switch (frame.kind) {
      case FrameKind::kPython:
        if (std::optional<PythonFrameName> python = ParsePythonFrameName(frame.name)) {
          line->set_function_id(FunctionOf(python->qualname, python->file));
          line->set_line(python->line);
          break;
        }
        line->set_function_id(FunctionOf(frame.name, ""));
        break;
      case FrameKind::kKernel:
        line->set_function_id(FunctionOf(KernelFunctionName(frame.name), ""));
        break;
      case FrameKind::kNative:
      case FrameKind::kMarker:
      case FrameKind::kProcess:
      case FrameKind::kThread:
        line->set_function_id(FunctionOf(frame.name, ""));
        break;
    }
    return it->second;
  }

 private:
  uint64_t FunctionOf(std::string_view name, std::string_view file) {
    auto [it, inserted] = function_ids_.try_emplace({std::string(name), std::string(file)}, 0);
    if (!inserted) return it->second;
    pb::Function* function = out_.add_function();
    function->set_id(out_.function_size());
    function->set_name(String(name));
    function->set_system_name(function->name());
    if (!file.empty()) function->set_filename(String(file));
    it->second = function->id();
    return it->second;
  }

  // The mapping of the code at `file_offset` in `module`, and the address
  // that offset has in it. Addresses are ELF virtual addresses where the
  // module's segments are known: one mapping per executable segment, with
  // memory_start = its vaddr and file_offset = its offset, as the file's own
  // program header lays it out, so that a reader maps address -> file offset
  // -> symbol the same way for PIE and non-PIE files alike. Otherwise the
  // address is the file offset itself, in one mapping from 0 that covers the
  // offsets seen.
  std::pair<pb::Mapping*, uint64_t> MappingOf(const NativeModule& module, uint64_t file_offset) {
    for (const NativeModule::Segment& segment : module.code_segments) {
      if (file_offset < segment.file_offset || file_offset - segment.file_offset >= segment.size) {
        continue;
      }
      pb::Mapping& mapping = MappingOf(module.path, module.build_id, &segment);
      return {&mapping, file_offset - segment.file_offset + segment.vaddr};
    }
    pb::Mapping& mapping = MappingOf(module.path, module.build_id, nullptr);
    mapping.set_memory_limit(std::max<uint64_t>(mapping.memory_limit(), file_offset + 1));
    return {&mapping, file_offset};
  }

  pb::Mapping& MappingOf(std::string_view filename, std::string_view build_id,
                         const NativeModule::Segment* segment = nullptr) {
    // NUL occurs in neither a path nor hex.
    std::string key(filename);
    key.push_back('\0');
    key.append(build_id);
    if (segment != nullptr) {
      absl::StrAppend(&key, "@", segment->vaddr, ":", segment->size, ":", segment->file_offset);
    }
    auto [it, inserted] = mapping_index_.try_emplace(std::move(key), 0);
    if (inserted) {
      it->second = out_.mapping_size();
      pb::Mapping* mapping = out_.add_mapping();
      mapping->set_id(out_.mapping_size());
      mapping->set_filename(String(filename));
      if (!build_id.empty()) mapping->set_build_id(String(build_id));
      if (segment != nullptr) {
        mapping->set_memory_start(segment->vaddr);
        mapping->set_memory_limit(segment->vaddr + segment->size);
        mapping->set_file_offset(segment->file_offset);
      }
      // Until a location without a function name says otherwise.
      mapping->set_has_functions(true);
    }
    return *out_.mutable_mapping(static_cast<int>(it->second));
  }

  pb::Profile& out_;
  absl::flat_hash_map<std::string, int64_t> strings_;
  absl::flat_hash_map<std::string, uint64_t> location_ids_;
  absl::flat_hash_map<std::pair<std::string, std::string>, uint64_t> function_ids_;
  absl::flat_hash_map<std::string, size_t> mapping_index_;
};

}  // namespace

pb::Profile ToPprof(const Profile& profile) {
  pb::Profile out;
  PprofBuilder builder(out);
  ValueLayout layout = ValueLayout::For(profile);
  for (const ValueLayout::Type& type : layout.types) {
    builder.AddValueType(out.add_sample_type(), type);
  }
  builder.AddValueType(out.mutable_period_type(), layout.period_type);
  out.set_period(layout.period);
  out.set_default_sample_type(builder.String(layout.default_type));
  if (!profile.title.empty()) out.add_comment(builder.String(profile.title));
  if (profile.start_time) out.set_time_nanos(absl::ToUnixNanos(*profile.start_time));
  if (profile.duration) out.set_duration_nanos(absl::ToInt64Nanoseconds(*profile.duration));

  std::vector<uint64_t> root_first;
  for (const ProfileStack& stack : profile.stacks()) {
    if (stack.count == 0) continue;
    pb::Sample* sample = out.add_sample();
    CpuState state = CpuState::kUnknown;
    std::optional<uint32_t> pid;
    root_first.clear();
    for (size_t i = 0; i < stack.frames.size(); ++i) {
      const Frame& frame = stack.frames[i];
      if (frame.kind == FrameKind::kProcess) {
        if (std::optional<ProcessFrameName> process = ParseProcessFrameName(frame.name)) {
          pid = process->pid;
          builder.AddLabel(*sample, "pid", static_cast<int64_t>(process->pid));
          builder.AddLabel(*sample, "comm", process->comm);
        } else {
          builder.AddLabel(*sample, "comm", frame.name);
        }
        continue;
      }
      if (frame.kind == FrameKind::kThread) {
        if (std::optional<ThreadFrameName> thread = ParseThreadFrameName(frame.name)) {
          builder.AddLabel(*sample, "tid", static_cast<int64_t>(thread->tid));
          builder.AddLabel(*sample, "thread_name", thread->name);
        } else {
          builder.AddLabel(*sample, "thread_name", frame.name);
        }
        continue;
      }
      if (layout.weighted_by_state && i == 0 && frame.kind == FrameKind::kMarker &&
          (frame.name == kOnCpuRoot || frame.name == kOffCpuRoot)) {
        state = frame.name == kOnCpuRoot ? CpuState::kOnCpu : CpuState::kOffCpu;
        continue;
      }
      root_first.push_back(builder.LocationOf(frame));
    }
    if (root_first.empty()) {
      root_first.push_back(builder.LocationOf({std::string(kUnknownFrame), FrameKind::kMarker}));
    }
    for (auto it = root_first.rbegin(); it != root_first.rend(); ++it) sample->add_location_id(*it);
    layout.Values(stack, state, *sample);
    for (const ProfileLabel& label : profile.labels) {
      builder.AddLabel(*sample, label.key, label.value);
    }
    if (pid) {
      if (auto labels = profile.process_labels.find(*pid); labels != profile.process_labels.end()) {
        for (const ProfileLabel& label : labels->second) {
          builder.AddLabel(*sample, label.key, label.value);
        }
      }
    }
  }
  return out;
}

absl::StatusOr<std::string> Gzip(std::string_view data) {
  if (data.size() > std::numeric_limits<uInt>::max()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("gzip: ", data.size(), " bytes do not fit one deflate call"));
  }
  z_stream stream{};
  // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
  constexpr int kGzipWindowBits = 15 + 16;
  constexpr int kMemLevel = 8;
  if (deflateInit2(&stream, Z_BEST_SPEED, Z_DEFLATED, kGzipWindowBits, kMemLevel,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError("gzip: deflateInit2 failed");
  }
  std::string compressed(deflateBound(&stream, data.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(compressed.data());
  stream.avail_out = static_cast<uInt>(compressed.size());
  int result = deflate(&stream, Z_FINISH);
  compressed.resize(stream.total_out);
  deflateEnd(&stream);
  if (result != Z_STREAM_END) {
    return absl::InternalError(absl::StrCat("gzip: deflate failed (", result, ")"));
  }
  return compressed;
}

absl::Status PprofWriter::Write(const Profile& profile, std::ostream& out) const {
  std::string serialized;
  if (!ToPprof(profile).SerializeToString(&serialized)) {
    return absl::InternalError("pprof: serializing the profile failed");
  }
  absl::StatusOr<std::string> compressed = Gzip(serialized);
  if (!compressed.ok()) return compressed.status();
  out.write(compressed->data(), static_cast<std::streamsize>(compressed->size()));
  out.flush();
  if (!out) return absl::DataLossError("writing pprof: output stream failed");
  return absl::OkStatus();
}

}  // namespace pystrobe

#include "daemon/reports/recording_reader.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "exporters/profile.pb.h"
#include "model/frame_names.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb.h"

namespace pystrobe {
namespace {

namespace pb = ::perftools::profiles;
using ::google::protobuf::Struct;
using ::google::protobuf::Value;

// A recording larger than this once inflated is not one pystrobe wrote; the
// limit keeps a gzip bomb from taking the machine's memory.
constexpr size_t kMaxInflatedBytes = size_t{4} << 30;

// The roots record --off-cpu puts above the process frame; they stay, as
// they say which part of the time a stack belongs to.
constexpr std::string_view kOnCpuRoot = "[on-cpu]";
constexpr std::string_view kOffCpuRoot = "[off-cpu]";
constexpr std::string_view kKernelMapping = "[kernel]";
constexpr std::string_view kKernelSuffix = "_[k]";

// Debian's Abseil has its own string_view, which StrCat and StrSplit take.
absl::string_view AbslView(std::string_view text) { return {text.data(), text.size()}; }

absl::Status Invalid(std::string_view name, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(AbslView(name), ": ", AbslView(what)));
}

absl::StatusOr<std::string> Gunzip(std::string_view data, std::string_view name) {
  z_stream stream{};
  constexpr int kGzipWindowBits = 15 + 16;
  if (inflateInit2(&stream, kGzipWindowBits) != Z_OK) {
    return absl::InternalError("gunzip: inflateInit2 failed");
  }
  std::string out;
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in =
      static_cast<uInt>(std::min<size_t>(data.size(), std::numeric_limits<uInt>::max()));
  char chunk[1 << 16];
  int result = Z_OK;
  while (result == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(chunk);
    stream.avail_out = sizeof(chunk);
    result = inflate(&stream, Z_NO_FLUSH);
    out.append(chunk, sizeof(chunk) - stream.avail_out);
    if (out.size() > kMaxInflatedBytes) {
      inflateEnd(&stream);
      return Invalid(name, absl::StrCat("inflates to more than ", kMaxInflatedBytes >> 30,
                                        " GiB; not a recording"));
    }
    if (result == Z_BUF_ERROR && stream.avail_in == 0) break;  // input ended early
  }
  inflateEnd(&stream);
  if (result == Z_BUF_ERROR || (result == Z_OK && stream.avail_in == 0)) {
    return Invalid(name, "the gzip stream is truncated (the file was cut short)");
  }
  if (result != Z_STREAM_END) {
    return Invalid(name, absl::StrCat("not a valid gzip stream (",
                                      stream.msg != nullptr ? stream.msg : "corrupt data", ")"));
  }
  return out;
}

// A folded or speedscope frame name, read back with the module that wrote
// it: Python frames are "qualname (file:line)" or "qualname (file)".
RecordedFrame FrameFromName(std::string_view name) {
  if (std::optional<PythonFrameName> python = ParsePythonFrameName(name)) {
    // A demangled C++ symbol may also end in " (...)", but its parentheses
    // hold parameter lists and scopes, which a file name does not.
    bool file_like = python->file.find(',') == std::string_view::npos &&
                     python->file.find("::") == std::string_view::npos;
    if (file_like) {
      return {std::string(python->qualname), std::string(python->file), python->line,
              RecordedFrameKind::kPython};
    }
  }
  RecordedFrame frame{std::string(name), "", 0};
  frame.kind = ClassifyFrame(frame);
  return frame;
}

// "python3.11", "python3.12d", "libpython3.12.so.1.0": the interpreter's own files.
bool IsInterpreterModule(std::string_view module) {
  module = module.substr(module.rfind('/') + 1);
  if (module.starts_with("lib")) module.remove_prefix(3);
  return module.starts_with("python");
}

// CPython's own C functions: its internals ("_PyEval_EvalFrameDefault"),
// "Py_*", and the C API's namespaces ("PyObject_Call"). Extensions name
// their own APIs alike ("PyArray_*" is numpy's), hence a list, not "Py*".
bool IsInterpreterSymbol(std::string_view name) {
  if (name.starts_with("_Py") || name.starts_with("Py_")) return true;
  static constexpr std::string_view kApiNamespaces[] = {
      "Object",    "Eval",        "List",     "Dict",      "Long",       "Number",
      "Type",      "Unicode",     "Tuple",    "Frame",     "Code",       "Mem",
      "GC",        "Run",         "Import",   "Err",       "Float",      "Bytes",
      "ByteArray", "Sequence",    "Iter",     "CFunction", "Vectorcall", "Thread",
      "GILState",  "Module",      "Set",      "Slice",     "Arg",        "Method",
      "Cell",      "Gen",         "Coro",     "Capsule",   "Bool",       "Complex",
      "Weakref",   "Interpreter", "Mapping",  "Buffer",    "OS",         "StructSequence",
      "Exception", "Function",    "Instance", "Callable",  "Context",    "Marshal",
      "Sys"};
  if (!name.starts_with("Py")) return false;
  std::string_view rest = name.substr(2);
  for (std::string_view space : kApiNamespaces) {
    if (rest.starts_with(space) && rest.size() > space.size() && rest[space.size()] == '_') {
      return true;
    }
  }
  return false;
}

// The positions in a stack (root first) of the frames that are functions:
// all but the process and thread frames at its root.
std::vector<size_t> FunctionFramePositions(const std::vector<std::string_view>& names) {
  std::vector<size_t> kept;
  size_t at = 0;
  if (at < names.size() && (names[at] == kOnCpuRoot || names[at] == kOffCpuRoot)) {
    kept.push_back(at++);
  }
  if (at < names.size() && ParseProcessFrameName(names[at])) ++at;
  if (at < names.size() && ParseThreadFrameName(names[at])) ++at;
  for (; at < names.size(); ++at) kept.push_back(at);
  return kept;
}

bool IsSpaceOnly(std::string_view text) {
  return text.find_first_not_of(" \t\r\n\v\f") == std::string_view::npos;
}

// Whether every stack is under record --off-cpu's "[on-cpu]" or "[off-cpu]"
// root: a recording of wall time.
bool UnderOnAndOffCpuRoots(const Recording& recording) {
  return std::all_of(recording.stacks.begin(), recording.stacks.end(),
                     [&](const RecordedStack& stack) {
                       if (stack.frames.empty()) return false;
                       const std::string& root = recording.frames[stack.frames.front()].function;
                       return root == kOnCpuRoot || root == kOffCpuRoot;
                     });
}

}  // namespace

RecordedFrameKind ClassifyFrame(const RecordedFrame& frame, std::string_view module) {
  std::string_view name = frame.function;
  if (!frame.file.empty()) return RecordedFrameKind::kPython;
  if (module == kKernelMapping || name.ends_with(kKernelSuffix)) return RecordedFrameKind::kKernel;
  if (module.empty() && name.starts_with('[') && name.ends_with(']')) {
    return RecordedFrameKind::kMarker;
  }
  // A pprof mapping says where the code lies: names are not looked at.
  if (!module.empty()) {
    return IsInterpreterModule(module) ? RecordedFrameKind::kInterpreter
                                       : RecordedFrameKind::kNative;
  }
  if (std::optional<ModuleOffsetFrameName> unsymbolized = ParseModuleOffsetFrameName(name)) {
    return IsInterpreterModule(unsymbolized->module) ? RecordedFrameKind::kInterpreter
                                                     : RecordedFrameKind::kNative;
  }
  return IsInterpreterSymbol(name) ? RecordedFrameKind::kInterpreter : RecordedFrameKind::kNative;
}

size_t Recording::Intern(RecordedFrame frame) {
  auto [it, inserted] = frame_index_.try_emplace(frame, frames.size());
  if (inserted) frames.push_back(std::move(frame));
  return it->second;
}

int64_t Recording::Total(size_t sample_type) const {
  int64_t total = 0;
  for (const RecordedStack& stack : stacks) {
    if (sample_type < stack.values.size()) total += stack.values[sample_type];
  }
  return total;
}

absl::StatusOr<size_t> Recording::SampleTypeIndex(std::string_view type) const {
  std::vector<std::string> names;
  for (size_t i = 0; i < sample_types.size(); ++i) {
    if (sample_types[i].type == type) return i;
    names.push_back(sample_types[i].type);
  }
  return absl::NotFoundError(absl::StrCat("no sample type '", AbslView(type), "' (this ", format,
                                          " recording has: ", absl::StrJoin(names, ", "), ")"));
}

std::string FrameDisplayName(const RecordedFrame& frame) {
  if (frame.file.empty()) return frame.function;
  if (frame.line > 0) return absl::StrCat(frame.function, " (", frame.file, ":", frame.line, ")");
  return absl::StrCat(frame.function, " (", frame.file, ")");
}

absl::StatusOr<Recording> ParseFolded(std::string_view text, std::string_view name) {
  Recording recording;
  recording.format = "folded";
  recording.sample_types = {{"samples", "count"}};
  int line_number = 0;
  for (absl::string_view piece : absl::StrSplit(AbslView(text), '\n')) {
    std::string_view line(piece.data(), piece.size());
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (IsSpaceOnly(line)) continue;
    size_t space = line.rfind(' ');
    int64_t count = 0;
    if (space == std::string_view::npos || space == 0 ||
        !absl::SimpleAtoi(AbslView(line.substr(space + 1)), &count) || count < 0) {
      std::string shown(line.substr(0, 80));
      return Invalid(
          name,
          absl::StrFormat("line %d is not a folded stack (\"frame;frame;... COUNT\"): %s%s",
                          line_number, absl::CHexEscape(shown), line.size() > 80 ? "..." : ""));
    }
    RecordedStack stack;
    std::vector<std::string_view> names;
    for (absl::string_view frame : absl::StrSplit(AbslView(line.substr(0, space)), ';')) {
      names.emplace_back(frame.data(), frame.size());
    }
    for (size_t at : FunctionFramePositions(names)) {
      stack.frames.push_back(recording.Intern(FrameFromName(names[at])));
    }
    stack.values = {count};
    recording.stacks.push_back(std::move(stack));
  }
  if (recording.stacks.empty()) return Invalid(name, "holds no stacks; not a recording");
  // record --off-cpu weighs every stack in microseconds, under these roots;
  // named as the pprof file of the same recording names its values.
  if (UnderOnAndOffCpuRoots(recording)) recording.sample_types = {{"wall", "microseconds"}};
  return recording;
}

absl::StatusOr<Recording> ParsePprof(std::string_view data, std::string_view name) {
  pb::Profile profile;
  if (!profile.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
    return Invalid(name, "gzip data that is not a pprof profile (profile.proto does not parse)");
  }
  const auto& strings = profile.string_table();
  auto string_at = [&](int64_t index, std::string_view what) -> absl::StatusOr<std::string> {
    if (index < 0 || index >= strings.size()) {
      return Invalid(name, absl::StrCat("pprof ", AbslView(what), " refers to string ", index,
                                        " of a table of ", strings.size()));
    }
    return strings[static_cast<int>(index)];
  };
  if (profile.sample_type_size() == 0) {
    return Invalid(name, "pprof profile without sample types; not a recording");
  }

  Recording recording;
  recording.format = "pprof";
  for (const pb::ValueType& type : profile.sample_type()) {
    absl::StatusOr<std::string> type_name = string_at(type.type(), "sample type");
    if (!type_name.ok()) return type_name.status();
    absl::StatusOr<std::string> unit = string_at(type.unit(), "sample unit");
    if (!unit.ok()) return unit.status();
    recording.sample_types.push_back({*type_name, *unit});
  }
  // pprof's rule: the last type, unless the profile names another.
  recording.default_sample_type = recording.sample_types.size() - 1;
  if (profile.default_sample_type() != 0) {
    absl::StatusOr<std::string> type_name =
        string_at(profile.default_sample_type(), "default sample type");
    if (!type_name.ok()) return type_name.status();
    if (absl::StatusOr<size_t> index = recording.SampleTypeIndex(*type_name); index.ok()) {
      recording.default_sample_type = *index;
    }
  }

  absl::flat_hash_map<uint64_t, const pb::Function*> functions;
  for (const pb::Function& function : profile.function()) functions[function.id()] = &function;
  absl::flat_hash_map<uint64_t, const pb::Mapping*> mappings;
  for (const pb::Mapping& mapping : profile.mapping()) mappings[mapping.id()] = &mapping;

  // Each location's frames, innermost first (pprof's order of inlined lines).
  absl::flat_hash_map<uint64_t, std::vector<size_t>> location_frames;
  for (const pb::Location& location : profile.location()) {
    std::string mapping_file;
    if (location.mapping_id() != 0) {
      auto mapping = mappings.find(location.mapping_id());
      if (mapping == mappings.end()) {
        return Invalid(name, absl::StrCat("pprof location ", location.id(), " refers to mapping ",
                                          location.mapping_id(), ", which the profile lacks"));
      }
      absl::StatusOr<std::string> file = string_at(mapping->second->filename(), "mapping");
      if (!file.ok()) return file.status();
      mapping_file = *file;
    }
    std::vector<size_t>& frames = location_frames[location.id()];
    for (const pb::Line& line : location.line()) {
      auto function = functions.find(line.function_id());
      if (function == functions.end()) {
        return Invalid(name, absl::StrCat("pprof location ", location.id(), " refers to function ",
                                          line.function_id(), ", which the profile lacks"));
      }
      absl::StatusOr<std::string> function_name = string_at(function->second->name(), "function");
      if (!function_name.ok()) return function_name.status();
      absl::StatusOr<std::string> file = string_at(function->second->filename(), "function file");
      if (!file.ok()) return file.status();
      RecordedFrame frame{*function_name, *file, file->empty() ? 0 : line.line()};
      frame.kind = ClassifyFrame(frame, mapping_file);
      // The kernel's functions, named as in folded stacks.
      if (mapping_file == kKernelMapping) frame.function.append(kKernelSuffix);
      frames.push_back(recording.Intern(std::move(frame)));
    }
    if (location.line_size() == 0) {
      // Not symbolized: where it is, as pystrobe names such frames.
      std::string base = mapping_file.substr(mapping_file.rfind('/') + 1);
      std::string function = base.empty() ? absl::StrFormat("0x%x", location.address())
                                          : absl::StrFormat("%s+0x%x", base, location.address());
      RecordedFrame frame{std::move(function), "", 0};
      frame.kind = ClassifyFrame(frame, mapping_file.empty() ? "?" : mapping_file);
      frames.push_back(recording.Intern(std::move(frame)));
    }
  }

  for (int s = 0; s < profile.sample_size(); ++s) {
    const pb::Sample& sample = profile.sample(s);
    if (static_cast<size_t>(sample.value_size()) != recording.sample_types.size()) {
      return Invalid(name,
                     absl::StrCat("pprof sample ", s, " has ", sample.value_size(), " values for ",
                                  recording.sample_types.size(), " sample types"));
    }
    RecordedStack stack;
    // Leaf first in pprof, root first here.
    for (int i = sample.location_id_size() - 1; i >= 0; --i) {
      auto frames = location_frames.find(sample.location_id(i));
      if (frames == location_frames.end()) {
        return Invalid(name, absl::StrCat("pprof sample ", s, " refers to location ",
                                          sample.location_id(i), ", which the profile lacks"));
      }
      stack.frames.insert(stack.frames.end(), frames->second.rbegin(), frames->second.rend());
    }
    stack.values.assign(sample.value().begin(), sample.value().end());
    recording.stacks.push_back(std::move(stack));
  }
  return recording;
}

absl::StatusOr<Recording> ParseSpeedscope(std::string_view json, std::string_view name) {
  Struct file;
  auto parsed = google::protobuf::util::JsonStringToMessage(std::string(json), &file);
  if (!parsed.ok()) {
    return Invalid(name, absl::StrCat("not valid JSON (", parsed.message().as_string(), ")"));
  }
  auto field = [](const Struct& s, std::string_view key) -> const Value* {
    auto it = s.fields().find(std::string(key));
    return it == s.fields().end() ? nullptr : &it->second;
  };
  const Value* shared = field(file, "shared");
  const Value* profiles = field(file, "profiles");
  if (shared == nullptr || !shared->has_struct_value() || profiles == nullptr ||
      !profiles->has_list_value()) {
    return Invalid(name, "JSON without speedscope's \"shared\" and \"profiles\"; not a recording");
  }
  const Value* frames = field(shared->struct_value(), "frames");
  if (frames == nullptr || !frames->has_list_value()) {
    return Invalid(name, "speedscope file without \"shared\".\"frames\"");
  }

  Recording recording;
  recording.format = "speedscope";
  std::vector<std::string> names;
  std::vector<RecordedFrame> shared_frames;
  for (int i = 0; i < frames->list_value().values_size(); ++i) {
    const Value& frame = frames->list_value().values(i);
    const Value* frame_name =
        frame.has_struct_value() ? field(frame.struct_value(), "name") : nullptr;
    if (frame_name == nullptr || !frame_name->has_string_value()) {
      return Invalid(name, absl::StrCat("speedscope frame ", i, " has no \"name\""));
    }
    names.push_back(frame_name->string_value());
    RecordedFrame recorded = FrameFromName(names.back());
    // Other writers (py-spy) name the function alone and give file and line apart.
    const Value* frame_file = field(frame.struct_value(), "file");
    const Value* frame_line = field(frame.struct_value(), "line");
    if (frame_file != nullptr && frame_file->has_string_value() &&
        frame_file->string_value() != recorded.file) {
      recorded = {names.back(), frame_file->string_value(), 0, RecordedFrameKind::kPython};
      if (frame_line != nullptr && frame_line->has_number_value()) {
        recorded.line = static_cast<int64_t>(frame_line->number_value());
      }
    }
    shared_frames.push_back(std::move(recorded));
  }

  std::string unit;
  for (int p = 0; p < profiles->list_value().values_size(); ++p) {
    const Value& value = profiles->list_value().values(p);
    if (!value.has_struct_value()) return Invalid(name, absl::StrCat("speedscope profile ", p));
    const Struct& profile = value.struct_value();
    const Value* type = field(profile, "type");
    if (type == nullptr || type->string_value() != "sampled") {
      return Invalid(name, absl::StrCat("speedscope profile ", p,
                                        " is not \"sampled\" (evented profiles are not read)"));
    }
    const Value* profile_unit = field(profile, "unit");
    std::string this_unit = profile_unit != nullptr ? profile_unit->string_value() : "none";
    if (p > 0 && this_unit != unit) {
      return Invalid(name, absl::StrCat("speedscope profiles in different units (", unit, ", ",
                                        this_unit, ")"));
    }
    unit = this_unit;
    const Value* samples = field(profile, "samples");
    const Value* weights = field(profile, "weights");
    if (samples == nullptr || !samples->has_list_value()) {
      return Invalid(name, absl::StrCat("speedscope profile ", p, " has no \"samples\""));
    }
    int count = samples->list_value().values_size();
    if (weights != nullptr && weights->list_value().values_size() != count) {
      return Invalid(name, absl::StrCat("speedscope profile ", p, " has ", count, " samples but ",
                                        weights->list_value().values_size(), " weights"));
    }
    for (int s = 0; s < count; ++s) {
      const Value& sample = samples->list_value().values(s);
      std::vector<size_t> indices;
      for (const Value& index : sample.list_value().values()) {
        double at = index.number_value();
        if (!index.has_number_value() || at < 0 || at >= static_cast<double>(names.size()) ||
            at != std::floor(at)) {
          return Invalid(name, absl::StrCat("speedscope profile ", p, " sample ", s,
                                            " refers to a frame that is not in \"shared\""));
        }
        indices.push_back(static_cast<size_t>(at));
      }
      std::vector<std::string_view> stack_names;
      for (size_t index : indices) stack_names.push_back(names[index]);
      RecordedStack stack;
      for (size_t at : FunctionFramePositions(stack_names)) {
        stack.frames.push_back(recording.Intern(shared_frames[indices[at]]));
      }
      double weight = weights != nullptr ? weights->list_value().values(s).number_value() : 1;
      if (weight < 0 || weight != std::floor(weight)) {
        return Invalid(name, absl::StrCat("speedscope profile ", p, " sample ", s, " has weight ",
                                          weight, "; want a whole number"));
      }
      stack.values = {static_cast<int64_t>(weight)};
      recording.stacks.push_back(std::move(stack));
    }
  }
  if (unit == "none" || unit.empty()) {
    recording.sample_types = {{"samples", "count"}};
  } else if (unit == "microseconds" || UnderOnAndOffCpuRoots(recording)) {
    // record --off-cpu: wall time, as the pprof file of the same recording
    // names it.
    recording.sample_types = {{"wall", unit}};
  } else {
    // pystrobe weighs a CPU profile's stacks by the time their samples stand for.
    recording.sample_types = {{unit == "nanoseconds" ? "cpu" : "time", unit}};
  }
  return recording;
}

Recording RecordingFromProfile(const Profile& profile, std::optional<uint32_t> pid) {
  Recording recording;
  recording.format = "daemon window";
  const std::string& unit = profile.count_unit;
  if (unit == "microseconds") {
    recording.sample_types = {{"wall", "microseconds"}};
  } else if (unit == "bytes") {
    recording.sample_types = {{"resident_growth", "bytes"}};
  } else if (unit == "inuse_bytes" || unit == "alloc_bytes") {
    recording.sample_types = {{unit == "inuse_bytes" ? "inuse_space" : "alloc_space", "bytes"}};
  } else {
    recording.sample_types = {{"samples", "count"}};
  }
  for (const ProfileStack& stack : profile.stacks()) {
    if (stack.count == 0) continue;
    RecordedStack recorded;
    bool wanted = !pid.has_value();
    for (const Frame& frame : stack.frames) {
      switch (frame.kind) {
        case FrameKind::kProcess:
          if (pid) {
            std::optional<ProcessFrameName> process = ParseProcessFrameName(frame.name);
            wanted = process.has_value() && process->pid == *pid;
          }
          continue;
        case FrameKind::kThread:
          continue;
        case FrameKind::kPython:
          if (std::optional<PythonFrameName> python = ParsePythonFrameName(frame.name)) {
            recorded.frames.push_back(
                recording.Intern({std::string(python->qualname), std::string(python->file),
                                  python->line, RecordedFrameKind::kPython}));
            continue;
          }
          break;
        case FrameKind::kKernel:
          recorded.frames.push_back(
              recording.Intern({frame.name, "", 0, RecordedFrameKind::kKernel}));
          continue;
        case FrameKind::kMarker:
          recorded.frames.push_back(
              recording.Intern({frame.name, "", 0, RecordedFrameKind::kMarker}));
          continue;
        case FrameKind::kNative:
          break;
      }
      RecordedFrame native{frame.name, "", 0};
      native.kind = ClassifyFrame(native, frame.module != nullptr ? frame.module->path : "");
      recorded.frames.push_back(recording.Intern(std::move(native)));
    }
    if (!wanted) continue;
    recorded.values = {static_cast<int64_t>(stack.count)};
    recording.stacks.push_back(std::move(recorded));
  }
  return recording;
}

absl::StatusOr<Recording> ParseOtlp(std::string_view data, std::string_view name) {
  namespace otlp = ::opentelemetry::proto::profiles::v1development;
  ::opentelemetry::proto::collector::profiles::v1development::ExportProfilesServiceRequest request;
  if (!request.ParseFromArray(data.data(), static_cast<int>(data.size())) ||
      request.dictionary().string_table_size() == 0 ||
      !request.dictionary().string_table(0).empty()) {
    return Invalid(name, "binary data that is neither gzip'd pprof nor an OTLP profiles request");
  }
  const otlp::ProfilesDictionary& dict = request.dictionary();
  auto string_at = [&](int32_t index, std::string_view what) -> absl::StatusOr<std::string> {
    if (index < 0 || index >= dict.string_table_size()) {
      return Invalid(name, absl::StrCat("OTLP ", AbslView(what), " refers to string ", index,
                                        " of a table of ", dict.string_table_size()));
    }
    return dict.string_table(index);
  };

  Recording recording;
  recording.format = "otlp";
  // The sample types, in the order the profiles bring them.
  std::vector<const otlp::Profile*> profiles;
  std::vector<size_t> profile_type;
  for (const otlp::ResourceProfiles& resource : request.resource_profiles()) {
    for (const otlp::ScopeProfiles& scope : resource.scope_profiles()) {
      for (const otlp::Profile& profile : scope.profiles()) {
        absl::StatusOr<std::string> type = string_at(profile.sample_type().type_strindex(), "type");
        if (!type.ok()) return type.status();
        absl::StatusOr<std::string> unit = string_at(profile.sample_type().unit_strindex(), "unit");
        if (!unit.ok()) return unit.status();
        size_t index = recording.sample_types.size();
        for (size_t i = 0; i < recording.sample_types.size(); ++i) {
          if (recording.sample_types[i].type == *type && recording.sample_types[i].unit == *unit) {
            index = i;
          }
        }
        if (index == recording.sample_types.size())
          recording.sample_types.push_back({*type, *unit});
        profiles.push_back(&profile);
        profile_type.push_back(index);
      }
    }
  }
  if (recording.sample_types.empty()) {
    return Invalid(name, "OTLP profiles request without profiles; not a recording");
  }

  // Each location's frames, innermost first (the format's order of inlined lines).
  std::vector<std::optional<std::vector<size_t>>> location_frames(dict.location_table_size());
  auto frames_of = [&](int32_t index) -> absl::StatusOr<const std::vector<size_t>*> {
    if (index < 0 || index >= dict.location_table_size()) {
      return Invalid(name, absl::StrCat("OTLP stack refers to location ", index, " of a table of ",
                                        dict.location_table_size()));
    }
    std::optional<std::vector<size_t>>& frames = location_frames[index];
    if (frames) return &*frames;
    frames.emplace();
    const otlp::Location& location = dict.location_table(index);
    std::string mapping_file;
    if (location.mapping_index() != 0) {
      if (location.mapping_index() < 0 || location.mapping_index() >= dict.mapping_table_size()) {
        return Invalid(name, absl::StrCat("OTLP location ", index, " refers to mapping ",
                                          location.mapping_index(), ", which the table lacks"));
      }
      absl::StatusOr<std::string> file =
          string_at(dict.mapping_table(location.mapping_index()).filename_strindex(), "mapping");
      if (!file.ok()) return file.status();
      mapping_file = *file;
    }
    for (const otlp::Line& line : location.lines()) {
      if (line.function_index() < 0 || line.function_index() >= dict.function_table_size()) {
        return Invalid(name, absl::StrCat("OTLP location ", index, " refers to function ",
                                          line.function_index(), ", which the table lacks"));
      }
      const otlp::Function& function = dict.function_table(line.function_index());
      absl::StatusOr<std::string> function_name = string_at(function.name_strindex(), "function");
      if (!function_name.ok()) return function_name.status();
      absl::StatusOr<std::string> file = string_at(function.filename_strindex(), "function file");
      if (!file.ok()) return file.status();
      RecordedFrame frame{*function_name, *file, file->empty() ? 0 : line.line()};
      if (mapping_file == kKernelMapping) frame.function.append(kKernelSuffix);
      frames->push_back(recording.Intern(std::move(frame)));
    }
    if (location.lines_size() == 0) {
      std::string base = mapping_file.substr(mapping_file.rfind('/') + 1);
      std::string function = base.empty() ? absl::StrFormat("0x%x", location.address())
                                          : absl::StrFormat("%s+0x%x", base, location.address());
      frames->push_back(recording.Intern({std::move(function), "", 0}));
    }
    return &*frames;
  };

  // One stack per stack index, its values from every profile that has it.
  absl::flat_hash_map<int32_t, size_t> stack_by_index;
  for (size_t p = 0; p < profiles.size(); ++p) {
    for (const otlp::Sample& sample : profiles[p]->samples()) {
      int32_t index = sample.stack_index();
      if (index < 0 || index >= dict.stack_table_size()) {
        return Invalid(name, absl::StrCat("OTLP sample refers to stack ", index, " of a table of ",
                                          dict.stack_table_size()));
      }
      auto [it, inserted] = stack_by_index.try_emplace(index, recording.stacks.size());
      if (inserted) {
        RecordedStack stack;
        const otlp::Stack& locations = dict.stack_table(index);
        // Leaf first in the format, root first here.
        for (int i = locations.location_indices_size() - 1; i >= 0; --i) {
          absl::StatusOr<const std::vector<size_t>*> frames =
              frames_of(locations.location_indices(i));
          if (!frames.ok()) return frames.status();
          stack.frames.insert(stack.frames.end(), (*frames)->rbegin(), (*frames)->rend());
        }
        stack.values.assign(recording.sample_types.size(), 0);
        recording.stacks.push_back(std::move(stack));
      }
      int64_t value = 0;
      for (int64_t v : sample.values()) value += v;
      // Timestamps alone: each one is one event.
      if (sample.values_size() == 0) value = sample.timestamps_unix_nano_size();
      recording.stacks[it->second].values[profile_type[p]] += value;
    }
  }

  // On- and off-CPU time together is wall time, as the pprof file of the
  // same recording has it and shows it first.
  absl::StatusOr<size_t> cpu = recording.SampleTypeIndex("cpu");
  absl::StatusOr<size_t> off_cpu = recording.SampleTypeIndex("off_cpu");
  if (cpu.ok() && off_cpu.ok() && !recording.SampleTypeIndex("wall").ok() &&
      recording.sample_types[*cpu].unit == recording.sample_types[*off_cpu].unit) {
    recording.sample_types.push_back({"wall", recording.sample_types[*cpu].unit});
    for (RecordedStack& stack : recording.stacks) {
      stack.values.push_back(stack.values[*cpu] + stack.values[*off_cpu]);
    }
    recording.default_sample_type = recording.sample_types.size() - 1;
  } else if (cpu.ok()) {
    recording.default_sample_type = *cpu;
  }
  return recording;
}

absl::StatusOr<Recording> ParseRecording(std::string_view data, std::string_view name) {
  if (data.empty()) return Invalid(name, "empty file: no stacks to report");
  if (data.size() >= 2 && static_cast<uint8_t>(data[0]) == 0x1f &&
      static_cast<uint8_t>(data[1]) == 0x8b) {
    absl::StatusOr<std::string> inflated = Gunzip(data, name);
    if (!inflated.ok()) return inflated.status();
    return ParsePprof(*inflated, name);
  }
  size_t first = data.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && data[first] == '{') return ParseSpeedscope(data, name);
  if (data.find('\0') != std::string_view::npos) return ParseOtlp(data, name);
  return ParseFolded(data, name);
}

absl::StatusOr<Recording> ReadRecording(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": a directory, not a recording"));
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int open_error = errno;
    std::string why = open_error != 0 ? std::strerror(open_error) : "cannot open";
    if (open_error == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": ", why));
    if (open_error == EACCES || open_error == EPERM) {
      return absl::PermissionDeniedError(absl::StrCat(path, ": ", why));
    }
    return absl::UnavailableError(absl::StrCat(path, ": ", why));
  }
  std::stringstream data;
  data << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return ParseRecording(data.str(), path);
}

}  // namespace pystrobe

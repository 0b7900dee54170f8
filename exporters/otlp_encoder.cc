#include "exporters/otlp_encoder.h"

#include <unistd.h>

#include <climits>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "exporters/pprof_writer.h"

namespace pystrobe {
namespace {

namespace pb = ::perftools::profiles;
namespace otlp = ::opentelemetry::proto::profiles::v1development;
namespace otlp_common = ::opentelemetry::proto::common::v1;

constexpr std::string_view kScopeName = "pystrobe";
constexpr std::string_view kKernelMapping = "[kernel]";  // as ToPprof names it

// pprof sample labels ToPprof writes from the process and thread frames.
constexpr std::string_view kPidLabel = "pid";
constexpr std::string_view kCommLabel = "comm";
constexpr std::string_view kTidLabel = "tid";
constexpr std::string_view kThreadNameLabel = "thread_name";

// Process labels (daemon/recording/process_labels.h, daemon/service/
// container_labels.cc) and the semantic-convention attributes they become.
// Labels not listed keep their own key.
const std::map<std::string_view, std::string_view>& ProcessLabelAttributes() {
  static const auto* kNames = new std::map<std::string_view, std::string_view>{
      {"python_version", "process.runtime.version"},
      {"container_id", "container.id"},
      {"pod_uid", "k8s.pod.uid"},
      {"pod_name", "k8s.pod.name"},
      {"pid_in_namespace", "pystrobe.pid_in_namespace"},
  };
  return *kNames;
}

using AttributeValue = std::variant<std::string, int64_t>;

void SetAnyValue(const AttributeValue& value, otlp_common::AnyValue& out) {
  if (const auto* text = std::get_if<std::string>(&value)) {
    out.set_string_value(*text);
  } else {
    out.set_int_value(std::get<int64_t>(value));
  }
}

void AddResourceAttribute(otlp_common::KeyValue* kv, std::string_view key,
                          const AttributeValue& value) {
  kv->set_key(std::string(key));
  SetAnyValue(value, *kv->mutable_value());
}

// The request's dictionary: every table deduplicated by value, index 0 the
// zero value.
class Dictionary {
 public:
  explicit Dictionary(otlp::ProfilesDictionary& out) : out_(out) {
    String("");
    out_.add_mapping_table();
    out_.add_location_table();
    out_.add_function_table();
    otlp::Link* link = out_.add_link_table();
    // The zero link with full-length ids, as the format recommends.
    link->set_trace_id(std::string(16, '\0'));
    link->set_span_id(std::string(8, '\0'));
    out_.add_attribute_table();
    out_.add_stack_table();
  }

  int32_t String(std::string_view s) {
    auto [it, inserted] = strings_.try_emplace(std::string(s), out_.string_table_size());
    if (inserted) out_.add_string_table(std::string(s));
    return it->second;
  }

  int32_t Attribute(std::string_view key, const AttributeValue& value) {
    // NUL occurs in no key: key, NUL, the value's kind, the value.
    std::string id(key);
    id.push_back('\0');
    id.push_back(value.index() == 0 ? 's' : 'i');
    if (const auto* text = std::get_if<std::string>(&value)) {
      id.append(*text);
    } else {
      absl::StrAppend(&id, std::get<int64_t>(value));
    }
    auto [it, inserted] = attributes_.try_emplace(std::move(id), out_.attribute_table_size());
    if (inserted) {
      otlp::KeyValueAndUnit* attribute = out_.add_attribute_table();
      attribute->set_key_strindex(String(key));
      SetAnyValue(value, *attribute->mutable_value());
    }
    return it->second;
  }

  int32_t Stack(const std::vector<int32_t>& leaf_first) {
    std::string id;
    for (int32_t index : leaf_first) absl::StrAppend(&id, index, ",");
    auto [it, inserted] = stacks_.try_emplace(std::move(id), out_.stack_table_size());
    if (inserted) {
      otlp::Stack* stack = out_.add_stack_table();
      for (int32_t index : leaf_first) stack->add_location_indices(index);
    }
    return it->second;
  }

  // The pprof profile's mappings, functions and locations, by their ids
  // there, moved into the dictionary on first use.
  class Source {
   public:
    Source(Dictionary& dictionary, const pb::Profile& pprof) : dict_(dictionary), pprof_(pprof) {
      for (int i = 0; i < pprof.mapping_size(); ++i) mappings_[pprof.mapping(i).id()] = i;
      for (int i = 0; i < pprof.function_size(); ++i) functions_[pprof.function(i).id()] = i;
      for (int i = 0; i < pprof.location_size(); ++i) locations_[pprof.location(i).id()] = i;
    }

    std::string_view PprofString(int64_t index) const {
      if (index < 0 || index >= pprof_.string_table_size()) return "";
      return pprof_.string_table(static_cast<int>(index));
    }

    int32_t Location(uint64_t pprof_id) {
      auto found = locations_.find(pprof_id);
      if (found == locations_.end()) return 0;
      const pb::Location& location = pprof_.location(found->second);
      otlp::Location converted;
      std::string_view frame_type;
      if (location.mapping_id() != 0) {
        converted.set_mapping_index(Mapping(location.mapping_id()));
        converted.set_address(location.address());
        frame_type = MappingFilename(location.mapping_id()) == kKernelMapping ? "kernel" : "native";
      }
      for (const pb::Line& line : location.line()) {
        otlp::Line* out = converted.add_lines();
        out->set_function_index(Function(line.function_id()));
        out->set_line(line.line());
        // A function with a file and no mapping is an interpreter frame.
        if (frame_type.empty() && FunctionHasFile(line.function_id())) frame_type = "cpython";
      }
      if (!frame_type.empty()) {
        converted.add_attribute_indices(
            dict_.Attribute("profile.frame.type", std::string(frame_type)));
      }
      return dict_.Intern(
          std::move(converted), dict_.locations_,
          [&](otlp::Location m) { *dict_.out_.add_location_table() = std::move(m); },
          dict_.out_.location_table_size());
    }

   private:
    bool FunctionHasFile(uint64_t pprof_id) const {
      auto found = functions_.find(pprof_id);
      return found != functions_.end() &&
             !PprofString(pprof_.function(found->second).filename()).empty();
    }

    std::string_view MappingFilename(uint64_t pprof_id) const {
      auto found = mappings_.find(pprof_id);
      if (found == mappings_.end()) return "";
      return PprofString(pprof_.mapping(found->second).filename());
    }

    int32_t Mapping(uint64_t pprof_id) {
      auto found = mappings_.find(pprof_id);
      if (found == mappings_.end()) return 0;
      const pb::Mapping& mapping = pprof_.mapping(found->second);
      otlp::Mapping converted;
      converted.set_memory_start(mapping.memory_start());
      converted.set_memory_limit(mapping.memory_limit());
      converted.set_file_offset(mapping.file_offset());
      converted.set_filename_strindex(dict_.String(PprofString(mapping.filename())));
      if (std::string_view build_id = PprofString(mapping.build_id()); !build_id.empty()) {
        converted.add_attribute_indices(
            dict_.Attribute("process.executable.build_id.gnu", std::string(build_id)));
      }
      return dict_.Intern(
          std::move(converted), dict_.mappings_,
          [&](otlp::Mapping m) { *dict_.out_.add_mapping_table() = std::move(m); },
          dict_.out_.mapping_table_size());
    }

    int32_t Function(uint64_t pprof_id) {
      auto found = functions_.find(pprof_id);
      if (found == functions_.end()) return 0;
      const pb::Function& function = pprof_.function(found->second);
      otlp::Function converted;
      converted.set_name_strindex(dict_.String(PprofString(function.name())));
      converted.set_system_name_strindex(dict_.String(PprofString(function.system_name())));
      converted.set_filename_strindex(dict_.String(PprofString(function.filename())));
      converted.set_start_line(function.start_line());
      return dict_.Intern(
          std::move(converted), dict_.functions_,
          [&](otlp::Function m) { *dict_.out_.add_function_table() = std::move(m); },
          dict_.out_.function_table_size());
    }

    Dictionary& dict_;
    const pb::Profile& pprof_;
    absl::flat_hash_map<uint64_t, int> mappings_;
    absl::flat_hash_map<uint64_t, int> functions_;
    absl::flat_hash_map<uint64_t, int> locations_;
  };

 private:
  // Deduplicates a table entry by its serialized bytes: deterministic here,
  // since our messages have no maps or unknown fields.
  template <typename Message, typename Append>
  int32_t Intern(Message message, absl::flat_hash_map<std::string, int32_t>& index, Append append,
                 int32_t next) {
    std::string key;
    message.SerializeToString(&key);
    auto [it, inserted] = index.try_emplace(std::move(key), next);
    if (inserted) append(std::move(message));
    return it->second;
  }

  otlp::ProfilesDictionary& out_;
  absl::flat_hash_map<std::string, int32_t> strings_;
  absl::flat_hash_map<std::string, int32_t> attributes_;
  absl::flat_hash_map<std::string, int32_t> stacks_;
  absl::flat_hash_map<std::string, int32_t> mappings_;
  absl::flat_hash_map<std::string, int32_t> functions_;
  absl::flat_hash_map<std::string, int32_t> locations_;
};

// The value indices of a pprof profile that become OTLP profiles: all of
// them, but wall time where it is exactly on-CPU plus off-CPU time.
std::vector<int> EmittedValueIndices(const pb::Profile& pprof) {
  std::vector<int> indices;
  int wall = -1, cpu = -1, off_cpu = -1;
  for (int i = 0; i < pprof.sample_type_size(); ++i) {
    std::string_view type = pprof.string_table(pprof.sample_type(i).type());
    if (type == "wall") wall = i;
    if (type == "cpu") cpu = i;
    if (type == "off_cpu") off_cpu = i;
  }
  bool wall_is_sum = wall >= 0 && cpu >= 0 && off_cpu >= 0;
  for (const pb::Sample& sample : pprof.sample()) {
    if (!wall_is_sum) break;
    wall_is_sum = sample.value(wall) == sample.value(cpu) + sample.value(off_cpu);
  }
  for (int i = 0; i < pprof.sample_type_size(); ++i) {
    if (!(wall_is_sum && i == wall)) indices.push_back(i);
  }
  return indices;
}

// The request under construction: resources by pid, their profiles by
// (which input profile, which value).
class RequestBuilder {
 public:
  RequestBuilder(otlp_collector::ExportProfilesServiceRequest& out,
                 const OtlpResourceOptions& options)
      : out_(out), options_(options), dictionary_(*out.mutable_dictionary()) {
    host_name_ = options.host_name.empty() ? LocalHostName() : options.host_name;
  }

  void Add(const Profile& profile) {
    pb::Profile pprof = ToPprof(profile);
    Dictionary::Source source(dictionary_, pprof);
    std::vector<int> emitted = EmittedValueIndices(pprof);
    // This input's profiles by resource and value index.
    absl::flat_hash_map<std::pair<int64_t, int>, otlp::Profile*> profiles;
    std::vector<int32_t> leaf_first;
    for (const pb::Sample& sample : pprof.sample()) {
      std::optional<int64_t> pid;
      std::string comm;
      std::vector<int32_t> attributes;
      for (const pb::Label& label : sample.label()) {
        std::string_view key = source.PprofString(label.key());
        if (key == kPidLabel) {
          pid = label.num();
        } else if (key == kCommLabel) {
          comm = std::string(source.PprofString(label.str()));
        } else if (key == kTidLabel) {
          attributes.push_back(dictionary_.Attribute("thread.id", label.num()));
        } else if (key == kThreadNameLabel) {
          attributes.push_back(
              dictionary_.Attribute("thread.name", std::string(source.PprofString(label.str()))));
        }
        // The static and process labels are the resource's attributes.
      }
      leaf_first.clear();
      for (uint64_t id : sample.location_id()) leaf_first.push_back(source.Location(id));
      int32_t stack = dictionary_.Stack(leaf_first);

      int64_t resource_key = pid.value_or(-1);
      for (int value_index : emitted) {
        int64_t value = sample.value(value_index);
        if (value == 0) continue;
        otlp::Profile*& target = profiles[{resource_key, value_index}];
        if (target == nullptr) {
          target = NewProfile(Resource(profile, pid, comm), pprof, value_index);
        }
        otlp::Sample* out = target->add_samples();
        out->set_stack_index(stack);
        for (int32_t attribute : attributes) out->add_attribute_indices(attribute);
        out->add_values(value);
      }
    }
  }

 private:
  // The scope of the resource of `pid` (nullopt: no process frame), made
  // with its attributes when first seen.
  otlp::ScopeProfiles& Resource(const Profile& profile, std::optional<int64_t> pid,
                                const std::string& comm) {
    int64_t key = pid.value_or(-1);
    auto [it, inserted] = resources_.try_emplace(key, nullptr);
    if (!inserted) return *it->second;
    otlp::ResourceProfiles* resource = out_.add_resource_profiles();
    auto* attributes = resource->mutable_resource()->mutable_attributes();
    AddResourceAttribute(attributes->Add(), "service.name", options_.service_name);
    if (!host_name_.empty()) AddResourceAttribute(attributes->Add(), "host.name", host_name_);
    if (pid) {
      AddResourceAttribute(attributes->Add(), "process.pid", *pid);
      if (!comm.empty()) AddResourceAttribute(attributes->Add(), "process.executable.name", comm);
      auto labels = profile.process_labels.find(static_cast<uint32_t>(*pid));
      if (labels != profile.process_labels.end()) {
        for (const ProfileLabel& label : labels->second) {
          auto name = ProcessLabelAttributes().find(label.key);
          if (name != ProcessLabelAttributes().end() && name->second == "process.runtime.version") {
            AddResourceAttribute(attributes->Add(), "process.runtime.name", std::string("CPython"));
          }
          AddResourceAttribute(
              attributes->Add(),
              name == ProcessLabelAttributes().end() ? std::string_view(label.key) : name->second,
              label.value);
        }
      }
    }
    for (const ProfileLabel& label : profile.labels) {
      AddResourceAttribute(attributes->Add(), label.key, label.value);
    }
    otlp::ScopeProfiles* scope = resource->add_scope_profiles();
    scope->mutable_scope()->set_name(std::string(kScopeName));
    scope->mutable_scope()->set_version(options_.scope_version);
    it->second = scope;
    return *scope;
  }

  otlp::Profile* NewProfile(otlp::ScopeProfiles& scope, const pb::Profile& pprof, int value_index) {
    auto text = [&](int64_t index) -> std::string_view {
      if (index < 0 || index >= pprof.string_table_size()) return "";
      return pprof.string_table(static_cast<int>(index));
    };
    otlp::Profile* profile = scope.add_profiles();
    const pb::ValueType& type = pprof.sample_type(value_index);
    profile->mutable_sample_type()->set_type_strindex(dictionary_.String(text(type.type())));
    profile->mutable_sample_type()->set_unit_strindex(dictionary_.String(text(type.unit())));
    profile->mutable_period_type()->set_type_strindex(
        dictionary_.String(text(pprof.period_type().type())));
    profile->mutable_period_type()->set_unit_strindex(
        dictionary_.String(text(pprof.period_type().unit())));
    profile->set_period(pprof.period());
    profile->set_time_unix_nano(static_cast<uint64_t>(pprof.time_nanos()));
    profile->set_duration_nano(static_cast<uint64_t>(pprof.duration_nanos()));
    return profile;
  }

  otlp_collector::ExportProfilesServiceRequest& out_;
  const OtlpResourceOptions& options_;
  std::string host_name_;
  Dictionary dictionary_;
  absl::flat_hash_map<int64_t, otlp::ScopeProfiles*> resources_;
};

}  // namespace

std::string LocalHostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

otlp_collector::ExportProfilesServiceRequest ToOtlpRequest(std::span<const Profile* const> profiles,
                                                           const OtlpResourceOptions& options) {
  otlp_collector::ExportProfilesServiceRequest request;
  RequestBuilder builder(request, options);
  for (const Profile* profile : profiles) {
    if (profile != nullptr) builder.Add(*profile);
  }
  return request;
}

absl::Status OtlpWriter::Write(const Profile& profile, std::ostream& out) const {
  const Profile* profiles[] = {&profile};
  std::string serialized;
  if (!ToOtlpRequest(profiles, options_).SerializeToString(&serialized)) {
    return absl::InternalError("otlp: serializing the request failed");
  }
  out.write(serialized.data(), static_cast<std::streamsize>(serialized.size()));
  out.flush();
  if (!out) return absl::DataLossError("writing otlp: output stream failed");
  return absl::OkStatus();
}

}  // namespace pystrobe

#include "config/config_loader.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "daemon/procfs/small_file.h"
#include "yaml-cpp/yaml.h"

namespace pystrobe {
namespace {

// A configuration is a page or two; anything far larger is a mistake.
constexpr size_t kMaxConfigFileBytes = 1 << 20;

const char* KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a value";
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

std::string Describe(const YAML::Node& node) {
  if (node.IsScalar()) return absl::StrCat("\"", node.Scalar(), "\"");
  return KindName(node);
}

// Walks one YAML document against the schema, collecting errors.
class SchemaWalker {
 public:
  // A key of a mapping: its name and what reads its value. The reader gets the
  // value node and the key's dotted path.
  struct Field {
    const char* name;
    std::function<void(const YAML::Node& value, const std::string& key)> read;
  };

  explicit SchemaWalker(ConfigParseResult* result) : result_(result) {}

  int error_count() const {
    return static_cast<int>(result_->errors.size()) + result_->errors_not_shown;
  }

  void Error(const YAML::Mark& mark, std::string key, std::string message) {
    if (static_cast<int>(result_->errors.size()) >= kMaxConfigErrors) {
      ++result_->errors_not_shown;
      return;
    }
    ConfigError error;
    error.key = std::move(key);
    if (!mark.is_null()) {
      error.line = mark.line + 1;
      error.column = mark.column + 1;
    }
    error.message = std::move(message);
    result_->errors.push_back(std::move(error));
  }

  void Error(const YAML::Node& at, std::string key, const absl::Status& status) {
    Error(at.Mark(), std::move(key), std::string(status.message()));
  }

  // Reads a mapping whose keys must all be among `fields`. A null value (the
  // key written with nothing after it) leaves every default in place.
  void ReadMap(const YAML::Node& node, const std::string& prefix,
               const std::vector<Field>& fields) {
    if (node.IsNull()) return;
    if (!node.IsMap()) {
      Error(node.Mark(), prefix, absl::StrCat("expected a mapping of keys, got ", Describe(node)));
      return;
    }
    absl::flat_hash_set<std::string> seen;
    for (const auto& entry : node) {
      const YAML::Node& key_node = entry.first;
      if (!key_node.IsScalar()) {
        Error(key_node.Mark(), prefix, "keys must be plain names");
        continue;
      }
      const std::string& name = key_node.Scalar();
      std::string key = prefix.empty() ? name : absl::StrCat(prefix, ".", name);
      if (!seen.insert(name).second) {
        Error(key_node.Mark(), key, "duplicate key");
        continue;
      }
      const Field* field = nullptr;
      for (const Field& candidate : fields) {
        if (name == candidate.name) field = &candidate;
      }
      if (field == nullptr) {
        std::vector<std::string> known;
        for (const Field& candidate : fields) known.push_back(candidate.name);
        Error(key_node.Mark(), key,
              absl::StrCat("unknown key (expected one of: ", absl::StrJoin(known, ", "), ")"));
        continue;
      }
      field->read(entry.second, key);
    }
  }

  // The scalar's text, or nullopt after reporting a wrong type.
  std::optional<std::string> Scalar(const YAML::Node& node, const std::string& key,
                                    absl::string_view expected) {
    if (node.IsScalar()) return node.Scalar();
    if (node.IsNull()) {
      Error(node.Mark(), key, absl::StrCat("has no value (expected ", expected, ")"));
    } else {
      Error(node.Mark(), key, absl::StrCat("expected ", expected, ", got ", Describe(node)));
    }
    return std::nullopt;
  }

  // Reads a scalar through `parse`, which returns StatusOr<T>.
  template <typename T, typename Parse>
  void Value(const YAML::Node& node, const std::string& key, absl::string_view expected,
             Parse parse, T* out) {
    std::optional<std::string> text = Scalar(node, key, expected);
    if (!text) return;
    auto parsed = parse(*text);
    if (!parsed.ok()) {
      Error(node, key, parsed.status());
      return;
    }
    *out = static_cast<T>(*parsed);
  }

  void Bool(const YAML::Node& node, const std::string& key, bool* out) {
    Value(node, key, "true or false", ParseBool, out);
  }

  template <typename T>
  void Int(const YAML::Node& node, const std::string& key, int64_t min, int64_t max, T* out) {
    Value(
        node, key, "an integer",
        [&](const std::string& text) { return ParseBoundedInt(text, min, max); }, out);
  }

  void Duration(const YAML::Node& node, const std::string& key, absl::Duration min,
                absl::Duration max, absl::Duration* out) {
    Value(
        node, key, "a duration (e.g. 90m, 24h, 7d)",
        [&](const std::string& text) -> absl::StatusOr<absl::Duration> {
          absl::StatusOr<absl::Duration> d = ParseDuration(text);
          if (d.ok() && (*d < min || *d > max)) {
            return absl::OutOfRangeError(absl::StrCat("\"", text, "\" is out of range (",
                                                      FormatConfigDuration(min), " to ",
                                                      FormatConfigDuration(max), ")"));
          }
          return d;
        },
        out);
  }

  // A size of at least `min`; zero too when `zero_allowed` (zero: no limit).
  void Size(const YAML::Node& node, const std::string& key, uint64_t min, bool zero_allowed,
            uint64_t* out) {
    Value(
        node, key, "a size (e.g. 500MiB, 1GiB)",
        [&](const std::string& text) -> absl::StatusOr<uint64_t> {
          absl::StatusOr<uint64_t> size = ParseSize(text);
          if (size.ok() && *size < min && !(zero_allowed && *size == 0)) {
            return absl::OutOfRangeError(
                absl::StrCat("\"", text, "\" is too small (at least ", FormatConfigSize(min), ")"));
          }
          return size;
        },
        out);
  }

  // A scalar string checked by `validate`, which returns a Status.
  template <typename Validate>
  void String(const YAML::Node& node, const std::string& key, absl::string_view expected,
              Validate validate, std::string* out) {
    Value(
        node, key, expected,
        [&](const std::string& text) -> absl::StatusOr<std::string> {
          absl::Status status = validate(text);
          if (!status.ok()) return status;
          return text;
        },
        out);
  }

  // A file the daemon will read (a CA bundle, a certificate, a key), checked
  // now so that a wrong path shows at --check-config and SIGHUP, not at the
  // first push. An empty string leaves it unset.
  void File(const YAML::Node& node, const std::string& key, std::string* out) {
    if (node.IsScalar() && node.Scalar().empty()) return;
    String(node, key, "an absolute file path", CheckReadableFile, out);
  }

  // A file holding a secret: read to check it, the secret itself not kept
  // (the push reads it when it starts).
  void SecretFile(const YAML::Node& node, const std::string& key, std::string* out) {
    if (node.IsScalar() && node.Scalar().empty()) return;
    String(
        node, key, "an absolute file path",
        [](const std::string& path) { return ReadSecretFile(path).status(); }, out);
  }

  // A list whose items are read by `item(node, key)`; null is an empty list.
  void List(const YAML::Node& node, const std::string& key,
            const std::function<void(const YAML::Node&, const std::string&)>& item) {
    if (node.IsNull()) return;
    if (!node.IsSequence()) {
      Error(node.Mark(), key, absl::StrCat("expected a list, got ", Describe(node)));
      return;
    }
    for (size_t i = 0; i < node.size(); ++i) item(node[i], absl::StrCat(key, "[", i, "]"));
  }

 private:
  ConfigParseResult* result_;
};

// Where the push keys that may contradict each other were written.
struct PushMarks {
  YAML::Mark tls = YAML::Mark::null_mark();
  YAML::Mark key_file = YAML::Mark::null_mark();
  YAML::Mark basic_auth = YAML::Mark::null_mark();
  YAML::Mark bearer = YAML::Mark::null_mark();
};

// What each push key allows alone but not with the others.
void CheckPushCombinations(SchemaWalker& w, const PushConfig& push, const PushMarks& marks) {
  const PushTlsConfig& tls = push.tls;
  bool any_tls = tls != PushTlsConfig{};
  if (any_tls && !push.url.empty() && !absl::StartsWith(push.url, "https://")) {
    w.Error(marks.tls, "exporters.push.tls",
            "TLS settings need an https:// url (the url is http://)");
  }
  if (!tls.key_file.empty() && tls.cert_file.empty()) {
    w.Error(marks.key_file, "exporters.push.tls.key_file",
            "a client key needs its certificate: set cert_file too");
  }
  const PushBasicAuthConfig& auth = push.basic_auth;
  if (auth.username.empty() != auth.password_file.empty()) {
    w.Error(marks.basic_auth, "exporters.push.basic_auth",
            auth.username.empty() ? "password_file needs a username"
                                  : "username needs a password_file");
  }
  if (!auth.username.empty() && !push.bearer_token_file.empty()) {
    w.Error(marks.bearer, "exporters.push.bearer_token_file",
            "basic_auth and a bearer token cannot both be used: choose one");
  }
}

// One reader per section of the file, each a mapping read through the
// walker into its part of DaemonConfig. Checks between keys of one section
// run in its reader once its keys read cleanly; the targets' check runs
// after the whole document (ReadDocument), so that it is the last error.

// Where `targets.all` was written, and whether the lists read cleanly: what
// CheckTargets needs once the document is read.
struct TargetsMarks {
  std::optional<YAML::Mark> all;
  bool all_given = false;
  // Errors inside targets make the lists incomplete; checking `all` against
  // them then would only add a confusing second error.
  bool had_errors = false;
};

// A list of strings, each checked by `validate`, into `out`.
template <typename Validate>
void ReadStringList(SchemaWalker& w, const YAML::Node& node, const std::string& key,
                    absl::string_view expected, Validate validate, std::vector<std::string>& out) {
  w.List(node, key, [&](const YAML::Node& item, const std::string& item_key) {
    std::string text;
    w.String(item, item_key, expected, validate, &text);
    if (!text.empty()) out.push_back(text);
  });
}

TargetsMarks ReadTargets(SchemaWalker& w, const YAML::Node& node, const std::string& prefix,
                         TargetsConfig& t) {
  TargetsMarks marks;
  int errors_before = w.error_count();
  w.ReadMap(node, prefix,
            {
                {"all",
                 [&](const YAML::Node& v, const std::string& k) {
                   marks.all = v.Mark();
                   marks.all_given = true;
                   w.Bool(v, k, &t.all);
                 }},
                {"pids",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.List(v, k, [&](const YAML::Node& item, const std::string& ik) {
                     int32_t pid = 0;
                     w.Int(item, ik, 1, kConfigMaxPid, &pid);
                     if (pid != 0) t.pids.push_back(pid);
                   });
                 }},
                {"process_names",
                 [&](const YAML::Node& v, const std::string& k) {
                   ReadStringList(w, v, k, "a regular expression", ValidateProcessNamePattern,
                                  t.process_names);
                 }},
                {"cgroups",
                 [&](const YAML::Node& v, const std::string& k) {
                   ReadStringList(w, v, k, "a cgroup path", ValidateCgroupPath, t.cgroups);
                 }},
                {"containers",
                 [&](const YAML::Node& v, const std::string& k) {
                   ReadStringList(w, v, k, "a container id", ValidateContainerId, t.containers);
                 }},
            });
  marks.had_errors = w.error_count() != errors_before;
  return marks;
}

// `all` against the lists: one of them must say what is profiled.
void CheckTargets(SchemaWalker& w, const TargetsConfig& t, const TargetsMarks& marks) {
  if (marks.had_errors) return;
  bool has_lists =
      !t.pids.empty() || !t.process_names.empty() || !t.cgroups.empty() || !t.containers.empty();
  if (t.all && has_lists) {
    w.Error(marks.all.value_or(YAML::Mark::null_mark()), "targets.all",
            marks.all_given
                ? "is true, which profiles every process and ignores the lists; set it "
                  "to false to profile only the listed targets"
                : "defaults to true, which profiles every process and ignores the lists; "
                  "set it to false to profile only the listed targets");
  } else if (!t.all && !has_lists) {
    w.Error(marks.all.value_or(YAML::Mark::null_mark()), "targets.all",
            "is false but no pids, process_names, cgroups or containers are listed: nothing "
            "would be profiled");
  }
}

void ReadPython(SchemaWalker& w, const YAML::Node& node, const std::string& prefix,
                PythonConfig& python) {
  w.ReadMap(
      node, prefix,
      {
          {"walk", [&](const YAML::Node& v, const std::string& k) { w.Bool(v, k, &python.walk); }},
          {"max_depth",
           [&](const YAML::Node& v, const std::string& k) {
             w.Int(v, k, kConfigMinPythonDepth, kConfigMaxPythonDepth, &python.max_depth);
           }},
          {"native_stacks",
           [&](const YAML::Node& v, const std::string& k) { w.Bool(v, k, &python.native_stacks); }},
          {"native_table_mib",
           [&](const YAML::Node& v, const std::string& k) {
             w.Int(v, k, kConfigMinNativeTableMib, kConfigMaxNativeTableMib,
                   &python.native_table_mib);
           }},
      });
}

// The TLS of push or otlp; `marks` records where it and its key were written.
void ReadTls(SchemaWalker& w, const YAML::Node& node, const std::string& prefix, PushTlsConfig& tls,
             PushMarks& marks) {
  marks.tls = node.Mark();
  w.ReadMap(node, prefix,
            {
                {"ca_file",
                 [&](const YAML::Node& v, const std::string& k) { w.File(v, k, &tls.ca_file); }},
                {"cert_file",
                 [&](const YAML::Node& v, const std::string& k) { w.File(v, k, &tls.cert_file); }},
                {"key_file",
                 [&](const YAML::Node& v, const std::string& k) {
                   marks.key_file = v.Mark();
                   w.File(v, k, &tls.key_file);
                 }},
                {"insecure_skip_verify",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.Bool(v, k, &tls.insecure_skip_verify);
                 }},
            });
}

void ReadBasicAuth(SchemaWalker& w, const YAML::Node& node, const std::string& prefix,
                   PushBasicAuthConfig& auth, PushMarks& marks) {
  marks.basic_auth = node.Mark();
  w.ReadMap(
      node, prefix,
      {
          {"username",
           [&](const YAML::Node& v, const std::string& k) {
             std::optional<std::string> text = w.Scalar(v, k, "a user name");
             if (!text) return;
             if (text->find(':') != std::string::npos) {
               w.Error(v.Mark(), k, "a basic-auth user name cannot contain ':'");
               return;
             }
             auth.username = *text;
           }},
          {"password_file", [&](const YAML::Node& v,
                                const std::string& k) { w.SecretFile(v, k, &auth.password_file); }},
      });
}

// A mapping of header names to strings, each checked by `validate`, names
// unique regardless of case; into `headers`.
void ReadHeaders(SchemaWalker& w, const YAML::Node& node, const std::string& prefix,
                 std::map<std::string, std::string>& headers,
                 const std::function<absl::Status(absl::string_view, absl::string_view)>& validate,
                 const char* what) {
  if (node.IsNull()) return;
  if (!node.IsMap()) {
    w.Error(node.Mark(), prefix,
            absl::StrCat("expected a mapping of header names to ", what, ", got ", Describe(node)));
    return;
  }
  for (const auto& entry : node) {
    const YAML::Node& name_node = entry.first;
    if (!name_node.IsScalar()) {
      w.Error(name_node.Mark(), prefix, "header names must be plain names");
      continue;
    }
    const std::string& name = name_node.Scalar();
    std::string key = absl::StrCat(prefix, ".", name);
    std::optional<std::string> value = w.Scalar(entry.second, key, what);
    if (!value) continue;
    if (absl::Status status = validate(name, *value); !status.ok()) {
      w.Error(name_node, key, status);
      continue;
    }
    bool duplicate = false;
    for (const auto& [seen, unused] : headers) duplicate |= absl::EqualsIgnoreCase(seen, name);
    if (duplicate) {
      w.Error(name_node.Mark(), key, "duplicate header (names are case-insensitive)");
      continue;
    }
    headers[name] = *value;
  }
}

void ReadRetention(SchemaWalker& w, const YAML::Node& node, const std::string& prefix,
                   RetentionConfig& retention) {
  w.ReadMap(node, prefix,
            {
                {"max_age",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.Duration(v, k, absl::ZeroDuration(), absl::Hours(24 * 3650),
                              &retention.max_age);
                 }},
                {"max_total_size",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.Size(v, k, uint64_t{1} << 20, /*zero_allowed=*/true,
                          &retention.max_total_size_bytes);
                 }},
            });
}

void ReadPush(SchemaWalker& w, const YAML::Node& node, const std::string& prefix,
              PushConfig& push) {
  PushMarks marks;
  // Errors inside push leave keys unset; checking the combinations then
  // would only add confusing errors.
  int errors_before = w.error_count();
  w.ReadMap(node, prefix,
            {
                {"url",
                 [&](const YAML::Node& v, const std::string& k) {
                   // An empty URL is how push is turned off.
                   if (v.IsScalar() && v.Scalar().empty()) {
                     push.url.clear();
                     return;
                   }
                   w.String(v, k, "a URL", ValidatePushUrl, &push.url);
                 }},
                {"timeout",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.Duration(v, k, kConfigMinPushTimeout, kConfigMaxPushTimeout, &push.timeout);
                 }},
                {"max_queue",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.Int(v, k, kConfigMinPushQueue, kConfigMaxPushQueue, &push.max_queue);
                 }},
                {"tls", [&](const YAML::Node& v,
                            const std::string& k) { ReadTls(w, v, k, push.tls, marks); }},
                {"basic_auth",
                 [&](const YAML::Node& v, const std::string& k) {
                   ReadBasicAuth(w, v, k, push.basic_auth, marks);
                 }},
                {"bearer_token_file",
                 [&](const YAML::Node& v, const std::string& k) {
                   marks.bearer = v.Mark();
                   w.SecretFile(v, k, &push.bearer_token_file);
                 }},
                {"tenant_id",
                 [&](const YAML::Node& v, const std::string& k) {
                   if (v.IsScalar() && v.Scalar().empty()) return;
                   w.String(v, k, "a tenant id", ValidateTenantId, &push.tenant_id);
                 }},
                {"headers",
                 [&](const YAML::Node& v, const std::string& k) {
                   ReadHeaders(w, v, k, push.headers, ValidatePushHeader, "a header value");
                 }},
            });
  if (w.error_count() == errors_before) CheckPushCombinations(w, push, marks);
}

// What the OTLP keys allow alone but not with the others.
void CheckOtlpCombinations(SchemaWalker& w, const YAML::Node& node, const OtlpConfig& otlp,
                           const PushMarks& marks) {
  const PushTlsConfig& tls = otlp.tls;
  bool any_tls = !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty() ||
                 tls.insecure_skip_verify;
  if (any_tls && !otlp.endpoint.empty() && !absl::StartsWith(otlp.endpoint, "https://")) {
    w.Error(marks.tls, "exporters.otlp.tls", "TLS settings need an https:// endpoint");
  }
  if (!tls.key_file.empty() && tls.cert_file.empty()) {
    w.Error(marks.key_file, "exporters.otlp.tls.key_file",
            "a client key needs its certificate (cert_file)");
  }
  for (const auto& [name, unused] : otlp.header_files) {
    for (const auto& [other, unused2] : otlp.headers) {
      if (absl::EqualsIgnoreCase(name, other)) {
        w.Error(node.Mark(), absl::StrCat("exporters.otlp.header_files.", name),
                "also in exporters.otlp.headers: give a header one value");
      }
    }
  }
}

void ReadOtlp(SchemaWalker& w, const YAML::Node& node, const std::string& prefix,
              OtlpConfig& otlp) {
  PushMarks marks;
  int errors_before = w.error_count();
  w.ReadMap(node, prefix,
            {
                {"endpoint",
                 [&](const YAML::Node& v, const std::string& k) {
                   // An empty endpoint is how the OTLP export is turned off.
                   if (v.IsScalar() && v.Scalar().empty()) {
                     otlp.endpoint.clear();
                     return;
                   }
                   w.String(v, k, "a URL", ValidatePushUrl, &otlp.endpoint);
                 }},
                {"protocol",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.String(v, k, "grpc or http/protobuf", ValidateOtlpProtocol, &otlp.protocol);
                 }},
                {"timeout",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.Duration(v, k, kConfigMinPushTimeout, kConfigMaxPushTimeout, &otlp.timeout);
                 }},
                {"max_queue",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.Int(v, k, kConfigMinPushQueue, kConfigMaxPushQueue, &otlp.max_queue);
                 }},
                {"tls", [&](const YAML::Node& v,
                            const std::string& k) { ReadTls(w, v, k, otlp.tls, marks); }},
                {"headers",
                 [&](const YAML::Node& v, const std::string& k) {
                   ReadHeaders(w, v, k, otlp.headers, ValidateOtlpHeader, "a header value");
                 }},
                {"header_files",
                 [&](const YAML::Node& v, const std::string& k) {
                   ReadHeaders(
                       w, v, k, otlp.header_files,
                       [](absl::string_view name, absl::string_view path) {
                         if (absl::Status status = ValidateOtlpHeader(name, ""); !status.ok()) {
                           return status;
                         }
                         return ReadSecretFile(std::string(path)).status();
                       },
                       "a file path");
                 }},
                {"service_name",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.String(
                       v, k, "a service name",
                       [](const std::string& text) {
                         return text.empty() ? absl::InvalidArgumentError("empty")
                                             : ValidateTenantId(text);
                       },
                       &otlp.service_name);
                 }},
            });
  if (w.error_count() == errors_before) CheckOtlpCombinations(w, node, otlp, marks);
}

void ReadPrometheus(SchemaWalker& w, const YAML::Node& node, const std::string& prefix,
                    PrometheusConfig& prometheus) {
  w.ReadMap(node, prefix,
            {
                {"listen",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.String(v, k, "HOST:PORT", ValidateListenAddress, &prometheus.listen);
                 }},
            });
}

void ReadExporters(SchemaWalker& w, const YAML::Node& node, const std::string& prefix,
                   ExportersConfig& e) {
  w.ReadMap(
      node, prefix,
      {
          {"profile_dir",
           [&](const YAML::Node& v, const std::string& k) {
             w.String(v, k, "a directory", ValidateAbsolutePath, &e.profile_dir);
           }},
          {"retention",
           [&](const YAML::Node& v, const std::string& k) { ReadRetention(w, v, k, e.retention); }},
          {"push", [&](const YAML::Node& v, const std::string& k) { ReadPush(w, v, k, e.push); }},
          {"otlp", [&](const YAML::Node& v, const std::string& k) { ReadOtlp(w, v, k, e.otlp); }},
          {"prometheus", [&](const YAML::Node& v,
                             const std::string& k) { ReadPrometheus(w, v, k, e.prometheus); }},
      });
}

void ReadLimits(SchemaWalker& w, const YAML::Node& node, const std::string& prefix,
                LimitsConfig& l) {
  w.ReadMap(node, prefix,
            {
                {"memory",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.Size(v, k, kConfigMinMemoryLimitBytes, /*zero_allowed=*/false,
                          &l.memory_bytes);
                 }},
                {"tracked_processes",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.Int(v, k, kConfigMinTrackedProcesses, kConfigMaxTrackedProcesses,
                         &l.tracked_processes);
                 }},
                {"metric_series",
                 [&](const YAML::Node& v, const std::string& k) {
                   w.Int(v, k, kConfigMinMetricSeries, kConfigMaxMetricSeries, &l.metric_series);
                 }},
            });
}

void ReadLabels(SchemaWalker& w, const YAML::Node& node, const std::string& prefix,
                std::map<std::string, std::string>& labels) {
  if (node.IsNull()) return;
  if (!node.IsMap()) {
    w.Error(node.Mark(), prefix,
            absl::StrCat("expected a mapping of label names to values, got ", Describe(node)));
    return;
  }
  for (const auto& entry : node) {
    const YAML::Node& name_node = entry.first;
    if (!name_node.IsScalar()) {
      w.Error(name_node.Mark(), prefix, "label names must be plain names");
      continue;
    }
    const std::string& name = name_node.Scalar();
    std::string key = absl::StrCat(prefix, ".", name);
    if (absl::Status status = ValidateStaticLabelName(name); !status.ok()) {
      w.Error(name_node, key, status);
      continue;
    }
    if (labels.count(name) != 0) {
      w.Error(name_node.Mark(), key, "duplicate label");
      continue;
    }
    std::optional<std::string> value = w.Scalar(entry.second, key, "a label value");
    if (!value) continue;
    if (value->empty()) {
      w.Error(entry.second.Mark(), key, "an empty label value is the same as no label");
      continue;
    }
    labels[name] = *value;
  }
}

// The whole file: the top-level keys, each section through its reader.
void ReadDocument(const YAML::Node& root, SchemaWalker& w, DaemonConfig& c) {
  TargetsMarks targets;
  w.ReadMap(
      root, "",
      {
          {"rate",
           [&](const YAML::Node& v, const std::string& k) {
             w.Int(v, k, kConfigMinRateHz, kConfigMaxRateHz, &c.rate_hz);
           }},
          {"targets", [&](const YAML::Node& v,
                          const std::string& k) { targets = ReadTargets(w, v, k, c.targets); }},
          {"python",
           [&](const YAML::Node& v, const std::string& k) { ReadPython(w, v, k, c.python); }},
          {"off_cpu", [&](const YAML::Node& v, const std::string& k) { w.Bool(v, k, &c.off_cpu); }},
          {"memory", [&](const YAML::Node& v, const std::string& k) { w.Bool(v, k, &c.memory); }},
          {"gpu", [&](const YAML::Node& v, const std::string& k) { w.Bool(v, k, &c.gpu); }},
          {"window",
           [&](const YAML::Node& v, const std::string& k) {
             w.Value(v, k, "a number of seconds", ParseWindow, &c.window);
           }},
          {"exporters",
           [&](const YAML::Node& v, const std::string& k) { ReadExporters(w, v, k, c.exporters); }},
          {"limits",
           [&](const YAML::Node& v, const std::string& k) { ReadLimits(w, v, k, c.limits); }},
          {"labels",
           [&](const YAML::Node& v, const std::string& k) { ReadLabels(w, v, k, c.labels); }},
      });
  CheckTargets(w, c.targets, targets);
}

}  // namespace

std::string ConfigError::ToString(absl::string_view source) const {
  std::string out(source);
  if (line > 0) absl::StrAppend(&out, ":", line, ":", column);
  absl::StrAppend(&out, ": ");
  if (!key.empty()) absl::StrAppend(&out, key, ": ");
  absl::StrAppend(&out, message);
  return out;
}

std::string ConfigParseResult::ErrorText() const {
  std::vector<std::string> lines;
  for (const ConfigError& error : errors) lines.push_back(error.ToString(source));
  if (errors_not_shown > 0) {
    lines.push_back(absl::StrCat(source, ": ... and ", errors_not_shown, " more error",
                                 errors_not_shown == 1 ? "" : "s"));
  }
  return absl::StrJoin(lines, "\n");
}

ConfigParseResult ParseConfig(absl::string_view yaml_text, absl::string_view source) {
  ConfigParseResult result;
  result.source = std::string(source);
  SchemaWalker walker(&result);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    walker.Error(e.mark, "", absl::StrCat("not valid YAML: ", e.msg));
    return result;
  }
  try {
    ReadDocument(root, walker, result.config);
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on aliases it cannot represent and the like.
    walker.Error(e.mark, "", absl::StrCat("cannot read: ", e.msg));
  }
  if (!result.ok()) result.config = DaemonConfig{};
  return result;
}

absl::StatusOr<ConfigParseResult> ReadConfigFile(const std::string& path) {
  // A directory fails at read(2), "Is a directory".
  absl::StatusOr<std::string> text =
      procfs::ReadSmallFile(path, {.max_bytes = kMaxConfigFileBytes});
  if (!text.ok()) return text.status();
  return ParseConfig(*text, path);
}

absl::Status ApplyOverrides(const ConfigOverrides& overrides, DaemonConfig* config) {
  DaemonConfig updated = *config;
  std::vector<std::string> errors;
  auto check = [&](absl::string_view flag, const absl::Status& status) {
    if (!status.ok()) errors.push_back(absl::StrCat(flag, ": ", status.message()));
  };
  if (overrides.prometheus_listen) {
    absl::Status status = ValidateListenAddress(*overrides.prometheus_listen);
    check("--prometheus-listen", status);
    if (status.ok()) updated.exporters.prometheus.listen = *overrides.prometheus_listen;
  }
  if (overrides.profile_dir) {
    absl::Status status = ValidateAbsolutePath(*overrides.profile_dir);
    check("--profile-dir", status);
    if (status.ok()) updated.exporters.profile_dir = *overrides.profile_dir;
  }
  if (overrides.window) {
    absl::StatusOr<absl::Duration> window = ParseWindow(*overrides.window);
    check("--window", window.status());
    if (window.ok()) updated.window = *window;
  }
  if (overrides.rate) {
    absl::StatusOr<int64_t> rate =
        ParseBoundedInt(*overrides.rate, kConfigMinRateHz, kConfigMaxRateHz);
    check("--rate", rate.status());
    if (rate.ok()) updated.rate_hz = static_cast<int>(*rate);
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  *config = std::move(updated);
  return absl::OkStatus();
}

absl::StatusOr<DaemonConfig> LoadEffectiveConfig(const std::string& path,
                                                 const ConfigOverrides& overrides) {
  DaemonConfig config;
  if (!path.empty()) {
    absl::StatusOr<ConfigParseResult> parsed = ReadConfigFile(path);
    if (!parsed.ok()) return parsed.status();
    if (!parsed->ok()) return absl::InvalidArgumentError(parsed->ErrorText());
    config = std::move(parsed->config);
  }
  if (absl::Status status = ApplyOverrides(overrides, &config); !status.ok()) return status;
  return config;
}

}  // namespace pystrobe

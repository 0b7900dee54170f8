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

void ReadDocument(const YAML::Node& root, SchemaWalker& w, DaemonConfig& c) {
  // Where `targets.all` was written, to point at it when it contradicts the lists.
  std::optional<YAML::Mark> all_mark;
  bool all_given = false;

  // Errors inside targets make the lists incomplete; checking `all` against
  // them then would only add a confusing second error.
  bool targets_had_errors = false;
  auto read_targets = [&](const YAML::Node& node, const std::string& prefix) {
    TargetsConfig& t = c.targets;
    int errors_before = w.error_count();
    w.ReadMap(node, prefix,
              {
                  {"all",
                   [&](const YAML::Node& v, const std::string& k) {
                     all_mark = v.Mark();
                     all_given = true;
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
                     w.List(v, k, [&](const YAML::Node& item, const std::string& ik) {
                       std::string pattern;
                       w.String(item, ik, "a regular expression", ValidateProcessNamePattern,
                                &pattern);
                       if (!pattern.empty()) t.process_names.push_back(pattern);
                     });
                   }},
                  {"cgroups",
                   [&](const YAML::Node& v, const std::string& k) {
                     w.List(v, k, [&](const YAML::Node& item, const std::string& ik) {
                       std::string path;
                       w.String(item, ik, "a cgroup path", ValidateCgroupPath, &path);
                       if (!path.empty()) t.cgroups.push_back(path);
                     });
                   }},
                  {"containers",
                   [&](const YAML::Node& v, const std::string& k) {
                     w.List(v, k, [&](const YAML::Node& item, const std::string& ik) {
                       std::string id;
                       w.String(item, ik, "a container id", ValidateContainerId, &id);
                       if (!id.empty()) t.containers.push_back(id);
                     });
                   }},
              });
    targets_had_errors = w.error_count() != errors_before;
  };

  auto read_python = [&](const YAML::Node& node, const std::string& prefix) {
    w.ReadMap(
        node, prefix,
        {
            {"walk",
             [&](const YAML::Node& v, const std::string& k) { w.Bool(v, k, &c.python.walk); }},
            {"max_depth",
             [&](const YAML::Node& v, const std::string& k) {
               w.Int(v, k, kConfigMinPythonDepth, kConfigMaxPythonDepth, &c.python.max_depth);
             }},
            {"native_stacks", [&](const YAML::Node& v,
                                  const std::string& k) { w.Bool(v, k, &c.python.native_stacks); }},
            {"native_table_mib",
             [&](const YAML::Node& v, const std::string& k) {
               w.Int(v, k, kConfigMinNativeTableMib, kConfigMaxNativeTableMib,
                     &c.python.native_table_mib);
             }},
        });
  };

  PushMarks push_marks;
  // TLS of push or otlp: `marks` records where it and its key were written.
  auto tls_reader = [&w](PushTlsConfig& tls_out, PushMarks& marks_out) {
    return [&w, t = &tls_out, m = &marks_out](const YAML::Node& node, const std::string& prefix) {
      PushTlsConfig& tls = *t;
      PushMarks& marks = *m;
      marks.tls = node.Mark();
      w.ReadMap(node, prefix,
                {
                    {"ca_file", [&](const YAML::Node& v,
                                    const std::string& k) { w.File(v, k, &tls.ca_file); }},
                    {"cert_file", [&](const YAML::Node& v,
                                      const std::string& k) { w.File(v, k, &tls.cert_file); }},
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
    };
  };
  auto read_push_tls = tls_reader(c.exporters.push.tls, push_marks);
  auto read_push_basic_auth = [&](const YAML::Node& node, const std::string& prefix) {
    PushBasicAuthConfig& auth = c.exporters.push.basic_auth;
    push_marks.basic_auth = node.Mark();
    w.ReadMap(node, prefix,
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
                  {"password_file",
                   [&](const YAML::Node& v, const std::string& k) {
                     w.SecretFile(v, k, &auth.password_file);
                   }},
              });
  };
  // A mapping of header names to strings, each checked by `validate`, names
  // unique regardless of case; into `headers`.
  auto headers_reader = [&w](std::map<std::string, std::string>& headers_out,
                             absl::Status (*validate)(absl::string_view, absl::string_view),
                             const char* what) {
    return [h = &headers_out, validate, what, &w](const YAML::Node& node,
                                                  const std::string& prefix) {
      std::map<std::string, std::string>& headers = *h;
      if (node.IsNull()) return;
      if (!node.IsMap()) {
        w.Error(
            node.Mark(), prefix,
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
    };
  };
  auto read_push_headers =
      headers_reader(c.exporters.push.headers, ValidatePushHeader, "a header value");

  PushMarks otlp_marks;
  auto read_otlp_tls = tls_reader(c.exporters.otlp.tls, otlp_marks);
  auto read_otlp_headers =
      headers_reader(c.exporters.otlp.headers, ValidateOtlpHeader, "a header value");
  auto read_otlp_header_files = headers_reader(
      c.exporters.otlp.header_files,
      [](absl::string_view name, absl::string_view path) {
        if (absl::Status status = ValidateOtlpHeader(name, ""); !status.ok()) return status;
        return ReadSecretFile(std::string(path)).status();
      },
      "a file path");
  auto read_otlp = [&](const YAML::Node& node, const std::string& prefix) {
    OtlpConfig& otlp = c.exporters.otlp;
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
                  {"tls", read_otlp_tls},
                  {"headers", read_otlp_headers},
                  {"header_files", read_otlp_header_files},
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
    if (w.error_count() != errors_before) return;
    const PushTlsConfig& tls = otlp.tls;
    bool any_tls = !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty() ||
                   tls.insecure_skip_verify;
    if (any_tls && !otlp.endpoint.empty() && !absl::StartsWith(otlp.endpoint, "https://")) {
      w.Error(otlp_marks.tls, "exporters.otlp.tls", "TLS settings need an https:// endpoint");
    }
    if (!tls.key_file.empty() && tls.cert_file.empty()) {
      w.Error(otlp_marks.key_file, "exporters.otlp.tls.key_file",
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
  };

  auto read_exporters = [&](const YAML::Node& node, const std::string& prefix) {
    ExportersConfig& e = c.exporters;
    w.ReadMap(node, prefix,
              {
                  {"profile_dir",
                   [&](const YAML::Node& v, const std::string& k) {
                     w.String(v, k, "a directory", ValidateAbsolutePath, &e.profile_dir);
                   }},
                  {"retention",
                   [&](const YAML::Node& v, const std::string& k) {
                     w.ReadMap(v, k,
                               {
                                   {"max_age",
                                    [&](const YAML::Node& v2, const std::string& k2) {
                                      w.Duration(v2, k2, absl::ZeroDuration(),
                                                 absl::Hours(24 * 3650), &e.retention.max_age);
                                    }},
                                   {"max_total_size",
                                    [&](const YAML::Node& v2, const std::string& k2) {
                                      w.Size(v2, k2, uint64_t{1} << 20, /*zero_allowed=*/true,
                                             &e.retention.max_total_size_bytes);
                                    }},
                               });
                   }},
                  {"push",
                   [&](const YAML::Node& v, const std::string& k) {
                     // Errors inside push leave keys unset; checking the
                     // combinations then would only add confusing errors.
                     int errors_before = w.error_count();
                     w.ReadMap(v, k,
                               {
                                   {"url",
                                    [&](const YAML::Node& v2, const std::string& k2) {
                                      // An empty URL is how push is turned off.
                                      if (v2.IsScalar() && v2.Scalar().empty()) {
                                        e.push.url.clear();
                                        return;
                                      }
                                      w.String(v2, k2, "a URL", ValidatePushUrl, &e.push.url);
                                    }},
                                   {"timeout",
                                    [&](const YAML::Node& v2, const std::string& k2) {
                                      w.Duration(v2, k2, kConfigMinPushTimeout,
                                                 kConfigMaxPushTimeout, &e.push.timeout);
                                    }},
                                   {"max_queue",
                                    [&](const YAML::Node& v2, const std::string& k2) {
                                      w.Int(v2, k2, kConfigMinPushQueue, kConfigMaxPushQueue,
                                            &e.push.max_queue);
                                    }},
                                   {"tls", read_push_tls},
                                   {"basic_auth", read_push_basic_auth},
                                   {"bearer_token_file",
                                    [&](const YAML::Node& v2, const std::string& k2) {
                                      push_marks.bearer = v2.Mark();
                                      w.SecretFile(v2, k2, &e.push.bearer_token_file);
                                    }},
                                   {"tenant_id",
                                    [&](const YAML::Node& v2, const std::string& k2) {
                                      if (v2.IsScalar() && v2.Scalar().empty()) return;
                                      w.String(v2, k2, "a tenant id", ValidateTenantId,
                                               &e.push.tenant_id);
                                    }},
                                   {"headers", read_push_headers},
                               });
                     if (w.error_count() == errors_before) {
                       CheckPushCombinations(w, e.push, push_marks);
                     }
                   }},
                  {"otlp", read_otlp},
                  {"prometheus",
                   [&](const YAML::Node& v, const std::string& k) {
                     w.ReadMap(v, k,
                               {
                                   {"listen",
                                    [&](const YAML::Node& v2, const std::string& k2) {
                                      w.String(v2, k2, "HOST:PORT", ValidateListenAddress,
                                               &e.prometheus.listen);
                                    }},
                               });
                   }},
              });
  };

  auto read_limits = [&](const YAML::Node& node, const std::string& prefix) {
    LimitsConfig& l = c.limits;
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
  };

  auto read_labels = [&](const YAML::Node& node, const std::string& prefix) {
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
      if (c.labels.count(name) != 0) {
        w.Error(name_node.Mark(), key, "duplicate label");
        continue;
      }
      std::optional<std::string> value = w.Scalar(entry.second, key, "a label value");
      if (!value) continue;
      if (value->empty()) {
        w.Error(entry.second.Mark(), key, "an empty label value is the same as no label");
        continue;
      }
      c.labels[name] = *value;
    }
  };

  w.ReadMap(
      root, "",
      {
          {"rate",
           [&](const YAML::Node& v, const std::string& k) {
             w.Int(v, k, kConfigMinRateHz, kConfigMaxRateHz, &c.rate_hz);
           }},
          {"targets", read_targets},
          {"python", read_python},
          {"off_cpu", [&](const YAML::Node& v, const std::string& k) { w.Bool(v, k, &c.off_cpu); }},
          {"memory", [&](const YAML::Node& v, const std::string& k) { w.Bool(v, k, &c.memory); }},
          {"gpu", [&](const YAML::Node& v, const std::string& k) { w.Bool(v, k, &c.gpu); }},
          {"window",
           [&](const YAML::Node& v, const std::string& k) {
             w.Value(v, k, "a number of seconds", ParseWindow, &c.window);
           }},
          {"exporters", read_exporters},
          {"limits", read_limits},
          {"labels", read_labels},
      });

  if (targets_had_errors) return;
  const TargetsConfig& t = c.targets;
  bool has_lists =
      !t.pids.empty() || !t.process_names.empty() || !t.cgroups.empty() || !t.containers.empty();
  if (t.all && has_lists) {
    w.Error(all_mark.value_or(YAML::Mark::null_mark()), "targets.all",
            all_given ? "is true, which profiles every process and ignores the lists; set it "
                        "to false to profile only the listed targets"
                      : "defaults to true, which profiles every process and ignores the lists; "
                        "set it to false to profile only the listed targets");
  } else if (!t.all && !has_lists) {
    w.Error(all_mark.value_or(YAML::Mark::null_mark()), "targets.all",
            "is false but no pids, process_names, cgroups or containers are listed: nothing "
            "would be profiled");
  }
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

absl::StatusOr<bool> ParseOverrideFlag(absl::string_view flag,
                                       std::optional<absl::string_view> next_arg,
                                       ConfigOverrides* overrides, bool* consumed_next) {
  *consumed_next = false;
  std::optional<absl::string_view> inline_value;
  if (size_t eq = flag.find('='); eq != absl::string_view::npos) {
    inline_value = flag.substr(eq + 1);
    flag = flag.substr(0, eq);
  }
  std::optional<std::string>* slot = nullptr;
  if (flag == "--prometheus-listen") slot = &overrides->prometheus_listen;
  if (flag == "--profile-dir") slot = &overrides->profile_dir;
  if (flag == "--window") slot = &overrides->window;
  if (flag == "--rate") slot = &overrides->rate;
  if (slot == nullptr) return false;
  if (inline_value) {
    *slot = std::string(*inline_value);
  } else if (next_arg) {
    *slot = std::string(*next_arg);
    *consumed_next = true;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
  }
  return true;
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

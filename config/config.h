// The configuration of `pystrobe daemon`: the schema as a plain struct whose
// member initializers are the defaults, and the parsers for the value types the
// YAML file and the command line share (durations, sizes, HOST:PORT, ...).
//
// config/pystrobe.yaml documents every key for operators; a unit test checks
// that it parses to exactly DaemonConfig{}.
#ifndef PYSTROBE_CONFIG_CONFIG_H_
#define PYSTROBE_CONFIG_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pystrobe {

// Where the daemon looks when no --config is given.
inline constexpr char kDefaultConfigPath[] = "/etc/pystrobe/pystrobe.yaml";

// Which processes are profiled. `all` (the default) is every process on the
// host; with `all: false` a process is profiled when it matches any of the
// lists (a union). Giving lists while `all` is true is an error, so that a
// restriction is never silently ignored.
struct TargetsConfig {
  bool all = true;
  std::vector<int32_t> pids;
  // ECMAScript regular expressions, each matched against the whole process
  // name (comm, at most 15 characters) and the base name of its executable.
  std::vector<std::string> process_names;
  // cgroup v2 paths relative to the cgroup2 mount ("/system.slice/x.service");
  // a cgroup includes its descendants. Targeting happens in the kernel.
  std::vector<std::string> cgroups;
  // Container ids, lowercase hex, full (64) or a unique prefix of at least 12.
  std::vector<std::string> containers;

  friend bool operator==(const TargetsConfig&, const TargetsConfig&) = default;
};

struct PythonConfig {
  bool walk = true;     // walk CPython frames in the kernel
  int max_depth = 128;  // Python frames per stack; deeper stacks are marked truncated
  // Whole native stacks of CPython processes, walked in the kernel with unwind
  // tables, around and between their Python frames.
  bool native_stacks = true;
  // Kernel memory for those unwind tables, in MiB; when full, the tables
  // walked least recently are evicted (and loaded again when walked).
  int native_table_mib = 32;

  friend bool operator==(const PythonConfig&, const PythonConfig&) = default;
};

struct RetentionConfig {
  // Older profiles are deleted. Zero: no age limit.
  absl::Duration max_age = absl::Hours(7 * 24);
  // The oldest profiles are deleted until the directory fits. Zero: no limit.
  uint64_t max_total_size_bytes = uint64_t{1} << 30;

  friend bool operator==(const RetentionConfig&, const RetentionConfig&) = default;
};

// TLS of an https:// push. Files are absolute paths, checked readable when
// the configuration is loaded (start, SIGHUP, --check-config).
struct PushTlsConfig {
  std::string ca_file;    // PEM CA certificates for the store; empty: the system's
  std::string cert_file;  // a client certificate (PEM); empty: none
  std::string key_file;   // its private key (PEM); empty: inside cert_file
  bool insecure_skip_verify = false;

  friend bool operator==(const PushTlsConfig&, const PushTlsConfig&) = default;
};

struct PushBasicAuthConfig {
  std::string username;
  std::string password_file;  // the password, read from this file (never in the YAML)

  friend bool operator==(const PushBasicAuthConfig&, const PushBasicAuthConfig&) = default;
};

struct PushConfig {
  std::string url;  // empty: no push. http:// or https:// (Pyroscope ingest API)
  absl::Duration timeout = absl::Seconds(10);
  int max_queue = 16;  // windows waiting to be sent; beyond it the oldest is dropped
  PushTlsConfig tls;
  PushBasicAuthConfig basic_auth;
  std::string bearer_token_file;  // Authorization: Bearer, the token read from this file
  std::string tenant_id;          // sent as X-Scope-OrgID; empty: not sent
  // Extra headers sent with every push (values may be keys: never logged).
  std::map<std::string, std::string> headers;

  friend bool operator==(const PushConfig&, const PushConfig&) = default;
};

// OTLP Profiles export (exporters/otlp_pusher.h): each window as one
// ExportProfilesServiceRequest to an OpenTelemetry Collector or any OTLP
// profiles receiver, beside (or instead of) push.
struct OtlpConfig {
  std::string endpoint;           // empty: no OTLP export. http[s]://HOST:PORT[/PREFIX]
  std::string protocol = "grpc";  // "grpc" or "http/protobuf"
  absl::Duration timeout = absl::Seconds(10);
  int max_queue = 16;  // windows waiting to be sent; beyond it the oldest is dropped
  PushTlsConfig tls;   // https:// endpoints: CA, client certificate (mTLS)
  // Sent with every request (a tenant, an API key): values never logged.
  std::map<std::string, std::string> headers;
  // Headers whose values are read from files (absolute paths), so a key
  // stays out of the YAML; read again on SIGHUP.
  std::map<std::string, std::string> header_files;
  std::string service_name = "pystrobe";  // the resources' service.name

  friend bool operator==(const OtlpConfig&, const OtlpConfig&) = default;
};

struct PrometheusConfig {
  std::string listen = "127.0.0.1:9464";  // HOST:PORT, [IPv6]:PORT, or :PORT (all addresses)

  friend bool operator==(const PrometheusConfig&, const PrometheusConfig&) = default;
};

struct ExportersConfig {
  std::string profile_dir = "/var/lib/pystrobe/profiles";
  RetentionConfig retention;
  PushConfig push;
  OtlpConfig otlp;
  PrometheusConfig prometheus;

  friend bool operator==(const ExportersConfig&, const ExportersConfig&) = default;
};

struct LimitsConfig {
  uint64_t memory_bytes = uint64_t{256} << 20;  // the daemon's own memory
  int tracked_processes = 8192;                 // processes with state in the daemon
  int metric_series = 200;  // per-process label sets; the rest are summed as pid="other"

  friend bool operator==(const LimitsConfig&, const LimitsConfig&) = default;
};

struct DaemonConfig {
  int rate_hz = 19;
  TargetsConfig targets;
  PythonConfig python;
  bool off_cpu = false;
  // Sample resident growth (first touches, every 512 KiB, from kmem:rss_stat)
  // into a second profile per window, in bytes: costs about 80 ns per fault.
  bool memory = false;
  // Poll NVIDIA GPUs through NVML where it is (GPU series, figures, verdicts).
  bool gpu = true;
  absl::Duration window = absl::Seconds(60);
  ExportersConfig exporters;
  LimitsConfig limits;
  // Static labels added to every metric series and every profile.
  std::map<std::string, std::string> labels;

  friend bool operator==(const DaemonConfig&, const DaemonConfig&) = default;
};

// Ranges, shared by the YAML loader and the command-line overrides.
inline constexpr int kConfigMinRateHz = 1;
inline constexpr int kConfigMaxRateHz = 1000;
inline constexpr int kConfigMinPythonDepth = 1;
inline constexpr int kConfigMinNativeTableMib = 4;
inline constexpr int kConfigMaxNativeTableMib = 1024;
inline constexpr int kConfigMaxPythonDepth = 384;  // PYSTROBE_MAX_PYTHON_FRAMES
inline constexpr int64_t kConfigMinWindowSeconds = 1;
inline constexpr int64_t kConfigMaxWindowSeconds = 3600;
inline constexpr int64_t kConfigMaxPid = 4194304;  // PID_MAX_LIMIT on 64-bit
inline constexpr absl::Duration kConfigMinPushTimeout = absl::Milliseconds(100);
inline constexpr absl::Duration kConfigMaxPushTimeout = absl::Minutes(5);
inline constexpr int kConfigMinPushQueue = 1;
inline constexpr int kConfigMaxPushQueue = 1000;
inline constexpr uint64_t kConfigMinMemoryLimitBytes = uint64_t{32} << 20;
inline constexpr int kConfigMinTrackedProcesses = 16;
inline constexpr int kConfigMaxTrackedProcesses = 1 << 22;
inline constexpr int kConfigMinMetricSeries = 1;
inline constexpr int kConfigMaxMetricSeries = 100000;

// The value parsers below return InvalidArgument with a message that names the
// value but not the key ("\"7 days\" is not a duration (use e.g. 90m, 24h,
// 7d)"); callers prefix the key or flag.

// "500ms", "30s", "90m", "24h", "7d", "2w" and sums of them ("1h30m"). A bare
// "0" is zero; any other number needs a unit.
absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text);

// "512B", "64KiB", "500MiB", "1GiB", "2TiB" (powers of 1024), "100KB", "500MB",
// "1GB", "1TB" (powers of 1000), or a bare number of bytes.
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

// The shortest exact spelling in the units above ("7d", "90m", "1GiB",
// "1500ms"), so a configuration can be printed back.
std::string FormatConfigDuration(absl::Duration duration);
std::string FormatConfigSize(uint64_t bytes);

// A decimal integer in [min, max] (a leading '+' or '-' is allowed).
absl::StatusOr<int64_t> ParseBoundedInt(absl::string_view text, int64_t min, int64_t max);

// true/false (any case), as in YAML 1.2; yes/no/on/off are refused.
absl::StatusOr<bool> ParseBool(absl::string_view text);

// The window: whole seconds ("60") or a duration ("2m"), within
// [kConfigMinWindowSeconds, kConfigMaxWindowSeconds].
absl::StatusOr<absl::Duration> ParseWindow(absl::string_view text);

// HOST:PORT where HOST is an IPv4 address, a bracketed IPv6 address, a host
// name, or empty (every address); PORT is 1..65535.
absl::Status ValidateListenAddress(absl::string_view text);

// An absolute path without "." or ".." components.
absl::Status ValidateAbsolutePath(absl::string_view text);

// http:// or https:// with a host, without user info (credentials belong in
// basic_auth), a query or a fragment.
absl::Status ValidatePushUrl(absl::string_view text);

// An extra push header: the name an HTTP token and not one the push sets
// itself (Host, Content-*, Authorization, X-Scope-OrgID, ...), the value
// without control characters. Messages never quote the value.
absl::Status ValidatePushHeader(absl::string_view name, absl::string_view value);

// An OTLP header: the name an HTTP token and not one the transport sets
// itself (Host, Content-*, TE, grpc-*, ...); Authorization and tenant
// headers are allowed. The value without control characters; messages never
// quote it.
absl::Status ValidateOtlpHeader(absl::string_view name, absl::string_view value);

// "grpc" or "http/protobuf".
absl::Status ValidateOtlpProtocol(absl::string_view text);

// A tenant id: printable, no spaces.
absl::Status ValidateTenantId(absl::string_view text);

// A file the daemon will read (a CA bundle, a certificate, a key): an
// absolute path to a regular file that can be opened and is not empty.
// FailedPrecondition/NotFound/PermissionDenied naming the path.
absl::Status CheckReadableFile(const std::string& path);

// A secret (a password, a token) read from a file: at most 64 KiB,
// surrounding whitespace (the trailing newline of `echo pw > file`) removed,
// not empty. Errors name the path, never the content.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// A Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*), not reserved ("__" prefix)
// and not one of the labels the daemon sets itself (pid, comm, ...).
absl::Status ValidateStaticLabelName(absl::string_view name);

// A container id: lowercase hex, 12 to 64 characters.
absl::Status ValidateContainerId(absl::string_view text);

// A cgroup path relative to the cgroup2 mount: absolute, no "." or "..".
absl::Status ValidateCgroupPath(absl::string_view text);

// An ECMAScript regular expression that compiles.
absl::Status ValidateProcessNamePattern(absl::string_view pattern);

// The labels the daemon sets on its own series; static labels may not use them.
const std::vector<std::string>& ReservedLabelNames();

}  // namespace pystrobe

#endif  // PYSTROBE_CONFIG_CONFIG_H_

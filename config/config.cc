#include "config/config.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "daemon/procfs/small_file.h"

namespace pystrobe {
namespace {

struct Unit {
  absl::string_view suffix;
  uint64_t factor;
};

// Longest suffixes first, so "ms" is not read as "m" followed by "s".
constexpr Unit kDurationUnitsMs[] = {
    {"ms", 1},          {"s", 1000},         {"m", 60 * 1000},
    {"h", 3600 * 1000}, {"d", 86400 * 1000}, {"w", 7 * 86400 * 1000},
};

constexpr Unit kSizeUnits[] = {
    {"KiB", uint64_t{1} << 10},
    {"MiB", uint64_t{1} << 20},
    {"GiB", uint64_t{1} << 30},
    {"TiB", uint64_t{1} << 40},
    {"KB", 1000},
    {"MB", 1000 * 1000},
    {"GB", 1000 * 1000 * 1000},
    {"TB", uint64_t{1000} * 1000 * 1000 * 1000},
    {"B", 1},
};

std::string Quoted(absl::string_view text) { return absl::StrCat("\"", text, "\""); }

absl::Status NotADuration(absl::string_view text) {
  return absl::InvalidArgumentError(
      absl::StrCat(Quoted(text), " is not a duration (use e.g. 90m, 24h, 7d)"));
}

absl::Status NotASize(absl::string_view text) {
  return absl::InvalidArgumentError(
      absl::StrCat(Quoted(text), " is not a size (use e.g. 500MiB, 1GiB)"));
}

// Splits "90m" into 90 and "m"; false when there are no digits first.
bool SplitNumberAndUnit(absl::string_view text, uint64_t* number, absl::string_view* unit) {
  size_t digits = 0;
  while (digits < text.size() && absl::ascii_isdigit(text[digits])) ++digits;
  if (digits == 0 || digits > 19) return false;
  if (!absl::SimpleAtoi(text.substr(0, digits), number)) return false;
  *unit = text.substr(digits);
  return true;
}

bool MultiplyOverflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

bool IsLabelNameChar(char c, bool first) {
  return absl::ascii_isalpha(c) || c == '_' || (!first && absl::ascii_isdigit(c));
}

bool IsHostNameChar(char c) { return absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_'; }

}  // namespace

absl::StatusOr<absl::Duration> ParseDuration(absl::string_view text) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  if (rest == "0") return absl::ZeroDuration();
  if (rest.empty()) return NotADuration(text);
  uint64_t total_ms = 0;
  while (!rest.empty()) {
    uint64_t number;
    absl::string_view tail;
    if (!SplitNumberAndUnit(rest, &number, &tail)) return NotADuration(text);
    const Unit* unit = nullptr;
    for (const Unit& candidate : kDurationUnitsMs) {
      if (absl::StartsWith(tail, candidate.suffix)) {
        unit = &candidate;
        break;
      }
    }
    if (unit == nullptr) return NotADuration(text);
    uint64_t ms;
    if (MultiplyOverflows(number, unit->factor, &ms) ||
        __builtin_add_overflow(total_ms, ms, &total_ms) ||
        total_ms > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / 1000)) {
      return absl::InvalidArgumentError(absl::StrCat(Quoted(text), " is too long a duration"));
    }
    rest = tail.substr(unit->suffix.size());
  }
  return absl::Milliseconds(static_cast<int64_t>(total_ms));
}

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  uint64_t number;
  absl::string_view unit_text;
  if (!SplitNumberAndUnit(trimmed, &number, &unit_text)) return NotASize(text);
  uint64_t factor = 0;
  if (unit_text.empty()) {
    factor = 1;
  } else {
    for (const Unit& unit : kSizeUnits) {
      if (unit_text == unit.suffix) factor = unit.factor;
    }
  }
  if (factor == 0) return NotASize(text);
  uint64_t bytes;
  if (MultiplyOverflows(number, factor, &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(Quoted(text), " is too large a size"));
  }
  return bytes;
}

std::string FormatConfigDuration(absl::Duration duration) {
  int64_t ms = absl::ToInt64Milliseconds(duration);
  if (ms == 0) return "0";
  // The largest unit that divides the value exactly.
  for (int i = static_cast<int>(std::size(kDurationUnitsMs)) - 1; i >= 0; --i) {
    const Unit& unit = kDurationUnitsMs[i];
    if (ms % static_cast<int64_t>(unit.factor) == 0) {
      return absl::StrCat(ms / static_cast<int64_t>(unit.factor), unit.suffix);
    }
  }
  return absl::StrCat(ms, "ms");
}

std::string FormatConfigSize(uint64_t bytes) {
  if (bytes == 0) return "0";
  constexpr Unit kBinary[] = {{"TiB", uint64_t{1} << 40},
                              {"GiB", uint64_t{1} << 30},
                              {"MiB", uint64_t{1} << 20},
                              {"KiB", uint64_t{1} << 10}};
  for (const Unit& unit : kBinary) {
    if (bytes % unit.factor == 0) return absl::StrCat(bytes / unit.factor, unit.suffix);
  }
  return absl::StrCat(bytes, "B");
}

absl::StatusOr<int64_t> ParseBoundedInt(absl::string_view text, int64_t min, int64_t max) {
  int64_t value;
  absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (trimmed.empty() || !absl::SimpleAtoi(trimmed, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(Quoted(text), " is not an integer"));
  }
  if (value < min || value > max) {
    return absl::OutOfRangeError(absl::StrCat(value, " is out of range (", min, " to ", max, ")"));
  }
  return value;
}

absl::StatusOr<bool> ParseBool(absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (lower == "true") return true;
  if (lower == "false") return false;
  return absl::InvalidArgumentError(
      absl::StrCat(Quoted(text), " is not a boolean (use true or false)"));
}

absl::StatusOr<absl::Duration> ParseWindow(absl::string_view text) {
  absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  absl::Duration window;
  int64_t seconds;
  if (absl::SimpleAtoi(trimmed, &seconds)) {
    window = absl::Seconds(seconds);
  } else {
    absl::StatusOr<absl::Duration> parsed = ParseDuration(trimmed);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          Quoted(text), " is not a number of seconds or a duration (use e.g. 60, 5m)"));
    }
    window = *parsed;
    if (window % absl::Seconds(1) != absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quoted(text), " is not a whole number of seconds"));
    }
    seconds = absl::ToInt64Seconds(window);
  }
  if (seconds < kConfigMinWindowSeconds || seconds > kConfigMaxWindowSeconds) {
    return absl::OutOfRangeError(absl::StrCat(Quoted(text), " is out of range (",
                                              kConfigMinWindowSeconds, " to ",
                                              kConfigMaxWindowSeconds, " seconds)"));
  }
  return window;
}

absl::Status ValidateListenAddress(absl::string_view text) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(text), " is not a HOST:PORT address (", why, ")"));
  };
  size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) return bad("no port");
  absl::string_view host = text.substr(0, colon);
  absl::string_view port_text = text.substr(colon + 1);
  int port;
  if (port_text.empty() || !absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
    return bad("the port must be 1 to 65535");
  }
  if (absl::StartsWith(host, "[")) {
    if (!absl::EndsWith(host, "]") || host.size() < 3) return bad("unclosed IPv6 bracket");
    for (char c : host.substr(1, host.size() - 2)) {
      if (!absl::ascii_isxdigit(c) && c != ':' && c != '.') return bad("bad IPv6 address");
    }
    return absl::OkStatus();
  }
  if (host.find(':') != absl::string_view::npos) return bad("put an IPv6 address in brackets");
  for (char c : host) {
    if (!IsHostNameChar(c)) return bad("bad host name");
  }
  return absl::OkStatus();
}

absl::Status ValidateAbsolutePath(absl::string_view text) {
  if (!absl::StartsWith(text, "/")) {
    return absl::InvalidArgumentError(absl::StrCat(Quoted(text), " is not an absolute path"));
  }
  for (absl::string_view part : absl::StrSplit(text, '/')) {
    if (part == "." || part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(Quoted(text), " must not contain \".\" or \"..\""));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePushUrl(absl::string_view text) {
  absl::string_view rest = text;
  if (!absl::ConsumePrefix(&rest, "http://") && !absl::ConsumePrefix(&rest, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(text), " is not an http:// or https:// URL"));
  }
  absl::string_view host = rest.substr(0, rest.find_first_of("/?#"));
  if (size_t at = host.rfind('@'); at != absl::string_view::npos) {
    // Not quoted: what is before the @ may be a password.
    return absl::InvalidArgumentError(
        "the URL has user info (user:password@): credentials in a URL end up in logs; use "
        "basic_auth with password_file, or bearer_token_file");
  }
  if (host.empty() || absl::StartsWith(host, ":")) {
    return absl::InvalidArgumentError(absl::StrCat(Quoted(text), " has no host"));
  }
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(text), " has a query or fragment (the push adds its own query)"));
  }
  for (char c : text) {
    if (absl::ascii_isspace(c) || absl::ascii_iscntrl(c)) {
      return absl::InvalidArgumentError(absl::StrCat(Quoted(text), " contains whitespace"));
    }
  }
  return absl::OkStatus();
}

namespace {

// A header's name is an HTTP token (RFC 9110 5.6.2).
absl::Status CheckHeaderName(absl::string_view name) {
  auto is_token_char = [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
           absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
  };
  if (name.empty() || !std::all_of(name.begin(), name.end(), is_token_char)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(name), " is not a header name (letters, digits, '-')"));
  }
  return absl::OkStatus();
}

// A header's value holds no line break or other control character but tabs.
absl::Status CheckHeaderValue(absl::string_view value) {
  for (char c : value) {
    if (absl::ascii_iscntrl(static_cast<unsigned char>(c)) && c != '\t') {
      return absl::InvalidArgumentError("the value has a control character (a line break?)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePushHeader(absl::string_view name, absl::string_view value) {
  if (absl::Status token = CheckHeaderName(name); !token.ok()) return token;
  for (absl::string_view reserved : {"Host", "Content-Length", "Content-Type", "Content-Encoding",
                                     "Transfer-Encoding", "Connection", "Expect", "User-Agent",
                                     "Authorization", "Proxy-Authorization", "X-Scope-OrgID"}) {
    if (absl::EqualsIgnoreCase(name, reserved)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name,
          " is set by the push itself (authentication: basic_auth or bearer_token_file; "
          "X-Scope-OrgID: tenant_id)"));
    }
  }
  return CheckHeaderValue(value);
}

absl::Status ValidateOtlpHeader(absl::string_view name, absl::string_view value) {
  if (absl::Status token = CheckHeaderName(name); !token.ok()) return token;
  for (absl::string_view reserved :
       {"Host", "Content-Length", "Content-Type", "Content-Encoding", "Transfer-Encoding",
        "Connection", "Expect", "User-Agent", "TE", "Upgrade", "Keep-Alive"}) {
    if (absl::EqualsIgnoreCase(name, reserved)) {
      return absl::InvalidArgumentError(absl::StrCat(name, " is set by the OTLP export itself"));
    }
  }
  if (absl::StartsWithIgnoreCase(name, "grpc-")) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": grpc-* headers are gRPC's own, set by the OTLP export"));
  }
  return CheckHeaderValue(value);
}

absl::Status ValidateOtlpProtocol(absl::string_view text) {
  if (text == "grpc" || text == "http/protobuf") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(Quoted(text), " is not an OTLP protocol (grpc or http/protobuf)"));
}

absl::Status ValidateTenantId(absl::string_view text) {
  for (char c : text) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quoted(text), " has a space or control character"));
    }
  }
  return absl::OkStatus();
}

namespace {

constexpr size_t kMaxSecretBytes = 64 * 1024;

}  // namespace

absl::Status CheckReadableFile(const std::string& path) {
  if (absl::Status s = ValidateAbsolutePath(path); !s.ok()) return s;
  // One byte: a file that opens may still fail to read (EIO, a FUSE mount).
  absl::StatusOr<std::string> first =
      procfs::ReadSmallFile(path, {.max_bytes = 1, .truncate = true, .regular_file_only = true});
  if (!first.ok()) return first.status();
  if (first->empty()) return absl::FailedPreconditionError(absl::StrCat(path, " is empty"));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  if (absl::Status s = ValidateAbsolutePath(path); !s.ok()) return s;
  absl::StatusOr<std::string> text =
      procfs::ReadSmallFile(path, {.max_bytes = kMaxSecretBytes, .regular_file_only = true});
  if (!text.ok()) return text.status();
  std::string secret(absl::StripAsciiWhitespace(*text));
  if (secret.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is empty"));
  }
  return secret;
}

const std::vector<std::string>& ReservedLabelNames() {
  static const auto* const kNames = new std::vector<std::string>{
      // Per process and per sample.
      "pid", "pid_in_namespace", "tid", "comm", "thread", "container_id", "cgroup", "pod_uid",
      "systemd_unit", "python_version",
      // Of the daemon's own series.
      "reason", "kind", "outcome",
      // Prometheus' own.
      "job", "instance"};
  return *kNames;
}

absl::Status ValidateStaticLabelName(absl::string_view name) {
  bool valid = !name.empty();
  for (size_t i = 0; valid && i < name.size(); ++i) valid = IsLabelNameChar(name[i], i == 0);
  if (!valid) {
    return absl::InvalidArgumentError(absl::StrCat(
        Quoted(name), " is not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"));
  }
  if (absl::StartsWith(name, "__")) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(name), " is reserved (label names starting with __ are Prometheus')"));
  }
  for (const std::string& reserved : ReservedLabelNames()) {
    if (name == reserved) {
      return absl::InvalidArgumentError(
          absl::StrCat(Quoted(name), " is set by pystrobe itself (reserved: ",
                       absl::StrJoin(ReservedLabelNames(), ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateContainerId(absl::string_view text) {
  bool hex = !text.empty();
  for (char c : text) hex = hex && (absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'));
  if (!hex || text.size() < 12 || text.size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(text), " is not a container id (12 to 64 lowercase hex characters)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateCgroupPath(absl::string_view text) {
  if (!absl::StartsWith(text, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(text),
                     " is not a cgroup path (absolute, relative to the cgroup2 mount, e.g. "
                     "/system.slice/nginx.service)"));
  }
  return ValidateAbsolutePath(text);
}

absl::Status ValidateProcessNamePattern(absl::string_view pattern) {
  if (pattern.empty()) return absl::InvalidArgumentError("an empty pattern matches nothing");
  try {
    std::regex compiled(pattern.data(), pattern.size(), std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(pattern), " is not a regular expression: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace pystrobe

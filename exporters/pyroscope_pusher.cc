#include "exporters/pyroscope_pusher.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "exporters/pprof_writer.h"

namespace pystrobe {
namespace {

// What the ingest handler's name parser accepts
// (grafana/pyroscope api/model/labelset/validate.go).
bool IsLabelNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}
bool IsAppNameChar(char c) { return IsLabelNameChar(c) || c == '-' || c == '/'; }

// Query values: everything but RFC 3986's unreserved characters escaped.
std::string QueryEscape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
        c == '~') {
      out.push_back(c);
    } else {
      absl::StrAppendFormat(&out, "%%%02X", static_cast<unsigned char>(c));
    }
  }
  return out;
}

// A header name: an HTTP token (RFC 9110 5.6.2).
bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

}  // namespace

bool IsRetryableStatus(int status) { return status == 408 || status == 429 || status >= 500; }

std::string IngestName(const PyroscopePushOptions& options, std::string_view suffix) {
  std::string name =
      absl::StrCat(options.app_name, absl::string_view(suffix.data(), suffix.size()), "{");
  bool first = true;
  for (const auto& [key, value] : options.labels) {  // std::map: sorted
    absl::StrAppend(&name, first ? "" : ",", key, "=", value);
    first = false;
  }
  name.push_back('}');
  return name;
}

HttpRequest BuildIngestRequest(const PyroscopePushOptions& options, const HttpUrl& url,
                               std::string_view profile_gz, absl::Time start, absl::Time end,
                               int sample_rate_hz, std::string_view boundary_in,
                               bool resident_growth) {
  absl::string_view boundary(boundary_in.data(), boundary_in.size());
  HttpRequest request;
  request.method = "POST";
  // `from`/`until` in unix seconds; the window's end rounded up so that a
  // window shorter than a second still spans one.
  int64_t from = absl::ToUnixSeconds(start);
  int64_t until = std::max(
      from + 1, absl::ToInt64Seconds(absl::Ceil(end - absl::UnixEpoch(), absl::Seconds(1))));
  request.target = absl::StrCat(
      url.path_prefix,
      "/ingest?name=", QueryEscape(IngestName(options, resident_growth ? ".resident_growth" : "")),
      "&from=", from, "&until=", until);
  if (sample_rate_hz > 0) absl::StrAppend(&request.target, "&sampleRate=", sample_rate_hz);
  absl::StrAppend(&request.target, "&spyName=", QueryEscape(options.spy_name),
                  "&units=", resident_growth ? "bytes" : "samples", "&aggregationType=sum");
  if (!options.tenant_id.empty()) request.headers.emplace_back("X-Scope-OrgID", options.tenant_id);
  for (const auto& header : options.headers) request.headers.push_back(header);
  if (options.encoding == PushBodyEncoding::kRawPprof) {
    absl::StrAppend(&request.target, "&format=pprof");
    request.headers.emplace_back("Content-Type", "application/octet-stream");
    request.body = std::string(profile_gz);
    return request;
  }
  request.headers.emplace_back("Content-Type",
                               absl::StrCat("multipart/form-data; boundary=", boundary));
  request.body = absl::StrCat("--", boundary,
                              "\r\n"
                              "Content-Disposition: form-data; name=\"profile\"; "
                              "filename=\"profile.pprof\"\r\n"
                              "Content-Type: application/octet-stream\r\n\r\n");
  request.body.append(profile_gz);
  if (resident_growth) {
    absl::StrAppend(&request.body, "\r\n--", boundary,
                    "\r\n"
                    "Content-Disposition: form-data; name=\"sample_type_config\"; "
                    "filename=\"sample_type_config.json\"\r\n"
                    "Content-Type: application/json\r\n\r\n",
                    "{\"resident_growth\":{\"units\":\"bytes\",\"aggregation\":\"sum\","
                    "\"display-name\":\"resident_growth_bytes\"}}");
  }
  absl::StrAppend(&request.body, "\r\n--", boundary, "--\r\n");
  return request;
}

absl::StatusOr<HttpUrl> ValidatePushOptions(const PyroscopePushOptions& options) {
  absl::StatusOr<HttpUrl> url = ParseHttpUrl(options.url);
  if (!url.ok()) return url.status();
  if (options.app_name.empty()) return absl::InvalidArgumentError("push: the app name is empty");
  for (char c : options.app_name) {
    if (!IsAppNameChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("push: app name \"", options.app_name, "\": '", std::string(1, c),
                       "' is not allowed (letters, digits, '_', '.', '-', '/')"));
    }
  }
  for (const auto& [key, value] : options.labels) {
    if (key.empty() || key == "__name__" || !std::all_of(key.begin(), key.end(), IsLabelNameChar)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push: label name \"", key, "\" is not allowed (letters, digits, '_', '.')"));
    }
    bool bad_char = std::any_of(value.begin(), value.end(), [](char c) {
      return c == ',' || c == '}' || c == '{' || c == '=' ||
             absl::ascii_iscntrl(static_cast<unsigned char>(c));
    });
    if (value.empty() || bad_char || absl::StripAsciiWhitespace(value) != value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push: label ", key, "=\"", value,
          "\": the value must be non-empty, without ',', '{', '}', '=' or surrounding spaces "
          "(Pyroscope's name syntax)"));
    }
  }
  for (char c : options.tenant_id) {
    if (absl::ascii_iscntrl(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError("push: the tenant id has a control character");
    }
  }
  // The full rules are the configuration's (config/config.h,
  // ValidatePushHeader); here only what would break the request itself.
  for (const auto& [name, value] : options.headers) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), IsTokenChar)) {
      return absl::InvalidArgumentError(
          absl::StrCat("push: header name \"", name, "\" is not an HTTP token"));
    }
    if (std::any_of(value.begin(), value.end(), [](char c) {
          return absl::ascii_iscntrl(static_cast<unsigned char>(c)) && c != '\t';
        })) {
      // The value is left out: a header may carry a key.
      return absl::InvalidArgumentError(
          absl::StrCat("push: header ", name, ": the value has a control character"));
    }
  }
  if (absl::Status policy = ValidatePushRetryPolicy(options.policy, "push"); !policy.ok()) {
    return policy;
  }
  return url;
}

absl::StatusOr<std::unique_ptr<PyroscopePusher>> PyroscopePusher::Create(
    PyroscopePushOptions options) {
  absl::StatusOr<HttpUrl> url = ValidatePushOptions(options);
  if (!url.ok()) return url.status();
  absl::StatusOr<std::unique_ptr<HttpClient>> client = HttpClient::Create(*url, options.client);
  if (!client.ok()) return client.status();
  return std::unique_ptr<PyroscopePusher>(
      new PyroscopePusher(std::move(options), *std::move(url), *std::move(client)));
}

PyroscopePusher::PyroscopePusher(PyroscopePushOptions options, HttpUrl url,
                                 std::unique_ptr<HttpClient> client)
    : options_(std::move(options)),
      url_(std::move(url)),
      random_(std::random_device{}()),
      queue_(options_.policy, std::move(client),
             [this](const HttpRequest&, const HttpResponse& response) { return Judge(response); }) {
}

PyroscopePusher::~PyroscopePusher() { Shutdown(absl::Now()); }

absl::Status PyroscopePusher::Push(const Profile& profile, absl::Time start, absl::Time end) {
  if (queue_.stopping()) return absl::FailedPreconditionError("push: the pusher is shut down");
  std::string serialized;
  if (!ToPprof(profile).SerializeToString(&serialized)) {
    return absl::InternalError("push: serializing the profile failed");
  }
  absl::StatusOr<std::string> compressed = Gzip(serialized);
  if (!compressed.ok()) return compressed.status();
  std::string boundary;
  {
    absl::MutexLock lock(&random_mu_);
    boundary = absl::StrFormat("pystrobe-%016x%016x", random_(), random_());
  }
  return queue_.Enqueue(BuildIngestRequest(options_, url_, *compressed, start, end,
                                           profile.sample_rate_hz, boundary,
                                           profile.count_unit == "bytes"));
}

PushStats PyroscopePusher::Stats() const { return queue_.Stats(); }

void PyroscopePusher::Shutdown(absl::Time deadline) { queue_.Shutdown(deadline); }

PushVerdict PyroscopePusher::Judge(const HttpResponse& response) const {
  PushVerdict verdict;
  if (response.status >= 200 && response.status < 300) return verdict;
  verdict.reason = PushErrorReason::kHttpStatus;
  verdict.error = absl::StrCat("POST ", url_.ToString("/ingest"), ": HTTP ", response.status, " ",
                               response.reason, ": ", ShortResponseBody(response.body));
  if (!IsRetryableStatus(response.status)) {
    verdict.outcome = PushVerdict::Outcome::kRejected;
    return verdict;
  }
  verdict.outcome = PushVerdict::Outcome::kRetry;
  if (std::optional<std::string> value = response.Header("Retry-After")) {
    verdict.retry_after = ParseRetryAfter(*value, absl::Now());
  }
  return verdict;
}

}  // namespace pystrobe

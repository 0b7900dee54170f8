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

std::string ShortBody(absl::string_view body) {
  std::string text(body.substr(0, 200));
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return std::string(absl::StripAsciiWhitespace(text));
}

}  // namespace

const char* PushErrorReasonLabel(PushErrorReason reason) {
  switch (reason) {
#define PYSTROBE_LABEL(name, label) \
  case PushErrorReason::name:       \
    return label;
    PYSTROBE_PUSH_ERROR_REASONS(PYSTROBE_LABEL)
#undef PYSTROBE_LABEL
  }
  return "other";
}

PushErrorReason PushErrorReasonOf(const absl::Status& error) {
  switch (error.code()) {
    case absl::StatusCode::kUnavailable:
      return PushErrorReason::kConnect;
    case absl::StatusCode::kUnauthenticated:
      return PushErrorReason::kTls;
    case absl::StatusCode::kDeadlineExceeded:
      return PushErrorReason::kTimeout;
    case absl::StatusCode::kDataLoss:
      return PushErrorReason::kConnectionLost;
    default:
      return PushErrorReason::kOther;
  }
}

absl::Duration PushBackoff(const PyroscopePushOptions& options, int retry, double uniform) {
  absl::Duration base = options.initial_backoff;
  for (int i = 1; i < retry && base < options.max_backoff; ++i) base *= 2;
  base = std::min(base, options.max_backoff);
  double factor = 1.0 - options.jitter * std::clamp(uniform, 0.0, 1.0);
  return base * factor;
}

std::optional<absl::Duration> ParseRetryAfter(std::string_view value_in, absl::Time now) {
  absl::string_view value(value_in.data(), value_in.size());
  absl::string_view text = absl::StripAsciiWhitespace(value);
  if (text.empty()) return std::nullopt;
  if (std::all_of(text.begin(), text.end(),
                  [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); })) {
    int64_t seconds = 0;
    if (!absl::SimpleAtoi(text, &seconds)) return absl::InfiniteDuration();  // absurdly large
    return absl::Seconds(seconds);
  }
  // IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT".
  absl::Time when;
  std::string error;
  if (absl::ParseTime("%a, %d %b %Y %H:%M:%S GMT", std::string(text), absl::UTCTimeZone(), &when,
                      &error)) {
    return std::max(absl::ZeroDuration(), when - now);
  }
  return std::nullopt;
}

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
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("push: the timeout must be positive");
  }
  if (options.max_queue < 1) return absl::InvalidArgumentError("push: max_queue must be >= 1");
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError("push: max_attempts must be >= 1");
  }
  if (options.initial_backoff < absl::ZeroDuration() ||
      options.max_backoff < options.initial_backoff) {
    return absl::InvalidArgumentError("push: need 0 <= initial_backoff <= max_backoff");
  }
  if (!(options.jitter >= 0.0 && options.jitter <= 1.0)) {
    return absl::InvalidArgumentError("push: jitter must be in [0, 1]");
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
      client_(std::move(client)),
      random_(std::random_device{}()) {
  worker_ = std::thread([this] { Run(); });
}

PyroscopePusher::~PyroscopePusher() { Shutdown(absl::Now()); }

absl::Status PyroscopePusher::Push(const Profile& profile, absl::Time start, absl::Time end) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::FailedPreconditionError("push: the pusher is shut down");
  }
  std::string serialized;
  if (!ToPprof(profile).SerializeToString(&serialized)) {
    return absl::InternalError("push: serializing the profile failed");
  }
  absl::StatusOr<std::string> compressed = Gzip(serialized);
  if (!compressed.ok()) return compressed.status();

  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::FailedPreconditionError("push: the pusher is shut down");
  ++stats_.enqueued;
  if (queue_.size() >= static_cast<size_t>(options_.max_queue)) {
    queue_.pop_front();
    ++stats_.dropped_queue_full;
  }
  queue_.push_back(Window{.profile_gz = *std::move(compressed),
                          .start = start,
                          .end = end,
                          .sample_rate_hz = profile.sample_rate_hz,
                          .resident_growth = profile.count_unit == "bytes"});
  return absl::OkStatus();
}

PushStats PyroscopePusher::Stats() const {
  absl::MutexLock lock(&mu_);
  PushStats stats = stats_;
  stats.queued = queue_.size() + (in_flight_ ? 1 : 0);
  return stats;
}

void PyroscopePusher::Shutdown(absl::Time deadline) {
  absl::MutexLock join_lock(&shutdown_mu_);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    shutdown_deadline_ = std::min(shutdown_deadline_, deadline);
  }
  cutoff_.BringForward(deadline);
  if (worker_.joinable()) worker_.join();
}

void PyroscopePusher::Run() {
  while (true) {
    Window window;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](PyroscopePusher* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping, nothing left
      if (stopping_ && absl::Now() >= shutdown_deadline_) {
        stats_.dropped_shutdown += queue_.size();
        queue_.clear();
        return;
      }
      window = std::move(queue_.front());
      queue_.pop_front();
      in_flight_ = true;
    }
    bool completed = SendWithRetries(window);
    absl::MutexLock lock(&mu_);
    in_flight_ = false;
    if (!completed) ++stats_.dropped_shutdown;
  }
}

bool PyroscopePusher::SendWithRetries(const Window& window) {
  for (int attempt = 1;; ++attempt) {
    std::string boundary;
    {
      absl::MutexLock lock(&mu_);
      if (attempt > 1) ++stats_.retried;
      if (stopping_ && absl::Now() >= shutdown_deadline_) return false;
      boundary = absl::StrFormat("pystrobe-%016x%016x", random_(), random_());
    }
    HttpRequest request =
        BuildIngestRequest(options_, url_, window.profile_gz, window.start, window.end,
                           window.sample_rate_hz, boundary, window.resident_growth);
    absl::StatusOr<HttpResponse> response = client_->Send(request, options_.timeout, &cutoff_);
    if (!response.ok() && response.status().code() == absl::StatusCode::kCancelled) {
      return false;  // Shutdown's deadline: not a failure of the store
    }

    std::optional<absl::Duration> retry_after;
    std::string error;
    PushErrorReason reason = PushErrorReason::kHttpStatus;
    if (response.ok()) {
      if (response->status >= 200 && response->status < 300) {
        absl::MutexLock lock(&mu_);
        ++stats_.sent;
        stats_.bytes_sent += request.body.size();
        stats_.last_error.clear();
        return true;
      }
      error = absl::StrCat("POST ", url_.ToString("/ingest"), ": HTTP ", response->status, " ",
                           response->reason, ": ", ShortBody(response->body));
      if (!IsRetryableStatus(response->status)) {
        absl::MutexLock lock(&mu_);
        ++stats_.errors[static_cast<size_t>(PushErrorReason::kHttpStatus)];
        ++stats_.rejected;
        stats_.last_error = std::move(error);
        return true;
      }
      if (std::optional<std::string> value = response->Header("Retry-After")) {
        retry_after = ParseRetryAfter(*value, absl::Now());
      }
    } else {
      error = std::string(response.status().message());
      reason = PushErrorReasonOf(response.status());
    }

    absl::Duration delay;
    {
      absl::MutexLock lock(&mu_);
      ++stats_.errors[static_cast<size_t>(reason)];
      stats_.last_error = error;
      if (attempt >= options_.max_attempts) {
        ++stats_.failed;
        return true;
      }
      if (stopping_ && absl::Now() >= shutdown_deadline_) return false;
      delay = PushBackoff(options_, attempt, std::uniform_real_distribution<double>(0, 1)(random_));
    }
    if (retry_after) delay = std::max(delay, std::min(*retry_after, options_.max_retry_after));
    if (!SleepUntil(absl::Now() + delay)) return false;
  }
}

bool PyroscopePusher::SleepUntil(absl::Time until) {
  absl::MutexLock lock(&mu_);
  while (true) {
    absl::Time now = absl::Now();
    if (now >= shutdown_deadline_) return false;
    if (now >= until) return true;
    std::pair<PyroscopePusher*, absl::Time> seen(this, shutdown_deadline_);
    // Wakes early when Shutdown brings the deadline forward.
    mu_.AwaitWithDeadline(
        absl::Condition(
            +[](std::pair<PyroscopePusher*, absl::Time>* arg) ABSL_NO_THREAD_SAFETY_ANALYSIS {
              return arg->first->shutdown_deadline_ != arg->second;
            },
            &seen),
        std::min(until, shutdown_deadline_));
  }
}

}  // namespace pystrobe

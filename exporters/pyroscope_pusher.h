// Pushes each window's profile to a profile store with Pyroscope's ingest API
// (POST /ingest), from a worker thread, with a bounded queue and retries.
//
// The request, as Grafana Pyroscope's server reads it
// (grafana/pyroscope pkg/ingester/pyroscope/ingest_handler.go, readInputRawDataFromRequest,
// and pkg/og/convert/pprof/profile.go, loadPprofFromForm):
//   POST <prefix>/ingest?name=<app>{k=v,...}&from=<unix s>&until=<unix s>
//        &sampleRate=<hz>&spyName=<spy>&units=samples&aggregationType=sum
//   Content-Type: multipart/form-data; boundary=...
//   body: one file part, field "profile", filename "profile.pprof", holding the
//   gzipped profile.proto that PprofWriter writes (the server sniffs gzip).
// There is deliberately no `format=pprof` parameter: the server checks
// `format` before the content type, and with format=pprof it takes the whole
// body as the raw profile, so a multipart body would not parse. Multipart
// without `format` is what Pyroscope's own Go client sends
// (grafana/pyroscope-go upstream/remote/remote.go); `kRawPprof` is the other
// form the server accepts (format=pprof, the gzipped profile as the body).
//
// Transport: libcurl (exporters/http_client.h), so https:// with a private CA
// or client certificates, basic or bearer authentication, and the proxies of
// the environment; a tenant id goes as X-Scope-OrgID (Grafana's multi-tenant
// stores), extra headers as given.
//
// Outcomes, every window counted once: sent (2xx), rejected (any other 4xx
// than 408/429: retrying cannot help), failed (retries used up on connection
// errors, timeouts, 408, 429 and 5xx), dropped_queue_full (the oldest queued
// window, when a new one arrives and the queue is full), dropped_shutdown
// (still queued when Shutdown's deadline passed). Every failed attempt is
// also counted by reason (PushErrorReason).
#ifndef PYSTROBE_EXPORTERS_PYROSCOPE_PUSHER_H_
#define PYSTROBE_EXPORTERS_PYROSCOPE_PUSHER_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "exporters/http_client.h"
#include "exporters/profile.h"

namespace pystrobe {

enum class PushBodyEncoding {
  kMultipart,  // multipart/form-data, field "profile" (what pyroscope-go sends)
  kRawPprof,   // format=pprof, the gzipped profile as the body
};

struct PyroscopePushOptions {
  // http[s]://HOST[:PORT][/PREFIX]; requests go to PREFIX/ingest.
  std::string url;
  // TLS and credentials (secrets: never in a message).
  HttpClientOptions client;
  // Sent as X-Scope-OrgID when not empty.
  std::string tenant_id;
  // Sent with every request. Names are HTTP tokens; values have no control
  // characters.
  HttpHeaders headers;
  // The application name: Pyroscope's service_name. Letters, digits and
  // "_.-/" (the server's rule).
  std::string app_name = "pystrobe";
  // Static labels of the series (the daemon's configured labels). Keys:
  // letters, digits, '_' and '.'; values without ',', '{', '}', '=' or
  // surrounding spaces. Per-process labels travel inside the pprof.
  std::map<std::string, std::string> labels;
  std::string spy_name = "pystrobe";
  PushBodyEncoding encoding = PushBodyEncoding::kMultipart;

  // One request, from connect to the last byte of the response.
  absl::Duration timeout = absl::Seconds(10);
  // Windows waiting to be sent, besides the one being sent.
  int max_queue = 16;
  // Attempts per window (the first included) before it counts as failed.
  int max_attempts = 5;
  // Backoff before retry n (n = 1, 2, ...): initial_backoff * 2^(n-1), at most
  // max_backoff, scaled by a random factor in [1 - jitter, 1].
  absl::Duration initial_backoff = absl::Milliseconds(500);
  absl::Duration max_backoff = absl::Seconds(30);
  double jitter = 0.5;
  // A Retry-After longer than this is cut to it.
  absl::Duration max_retry_after = absl::Minutes(5);
};

// Why an attempt failed: one table for the enum, the metric's label values
// and their order. X(enumerator, label).
#define PYSTROBE_PUSH_ERROR_REASONS(X)                                          \
  X(kConnect, "connect")        /* the host or proxy unresolved or unreached */ \
  X(kTls, "tls")                /* certificate refused, handshake failed */     \
  X(kTimeout, "timeout")        /* no complete answer within the timeout */     \
  X(kConnectionLost, "network") /* the connection broke, or no HTTP answer */   \
  X(kHttpStatus, "http_status") /* an answer other than 2xx */                  \
  X(kOther, "other")

enum class PushErrorReason {
#define PYSTROBE_ENUMERATOR(name, label) name,
  PYSTROBE_PUSH_ERROR_REASONS(PYSTROBE_ENUMERATOR)
#undef PYSTROBE_ENUMERATOR
};
inline constexpr size_t kPushErrorReasons = 0
#define PYSTROBE_COUNT(name, label) +1
    PYSTROBE_PUSH_ERROR_REASONS(PYSTROBE_COUNT)
#undef PYSTROBE_COUNT
    ;
// The metric label of a reason ("tls").
const char* PushErrorReasonLabel(PushErrorReason reason);
// The reason of a transport error (HttpClient::Send's status codes).
PushErrorReason PushErrorReasonOf(const absl::Status& error);

// Counters since the pusher was created, for the daemon's metrics.
struct PushStats {
  uint64_t enqueued = 0;            // windows accepted by Push
  uint64_t sent = 0;                // 2xx
  uint64_t retried = 0;             // retries (attempts after the first)
  uint64_t dropped_queue_full = 0;  // pushed out of a full queue
  uint64_t dropped_shutdown = 0;    // abandoned at Shutdown's deadline
  uint64_t rejected = 0;            // 4xx other than 408/429
  uint64_t failed = 0;              // retries exhausted
  uint64_t queued = 0;              // waiting now, including one being sent
  uint64_t bytes_sent = 0;          // request bodies of windows sent
  // Failed attempts (retried or not), by PushErrorReason.
  std::array<uint64_t, kPushErrorReasons> errors{};
  // The last error (empty when the last attempt succeeded), for logs.
  std::string last_error;
};

// The backoff before retry `retry` (1 for the first retry), for `uniform` in
// [0, 1). Without Retry-After.
absl::Duration PushBackoff(const PyroscopePushOptions& options, int retry, double uniform);

// A Retry-After value: delay-seconds or an HTTP-date (RFC 9110), relative to
// `now`. nullopt when it is neither.
std::optional<absl::Duration> ParseRetryAfter(std::string_view value, absl::Time now);

// Whether a response status is worth retrying: 408, 429 and 5xx.
bool IsRetryableStatus(int status);

// The ingest request for one window, without the Host/Content-Length and
// authentication headers the client adds. `profile_gz` is the gzipped pprof. `boundary` is the
// multipart boundary (random in PyroscopePusher). `resident_growth`: the
// profile is resident growth in bytes (sample type resident_growth): the
// app name gets ".resident_growth", units=bytes, and a multipart body a
// sample_type_config part saying so (Pyroscope keeps only the sample types
// it knows or is told of). Exposed for tests.
HttpRequest BuildIngestRequest(const PyroscopePushOptions& options, const HttpUrl& url,
                               std::string_view profile_gz, absl::Time start, absl::Time end,
                               int sample_rate_hz, std::string_view boundary,
                               bool resident_growth = false);

// The `name` parameter: app{k=v,...}, keys sorted; `suffix` after app.
std::string IngestName(const PyroscopePushOptions& options, std::string_view suffix = "");

// Checks the options: URL, app name, labels, headers, ranges.
absl::StatusOr<HttpUrl> ValidatePushOptions(const PyroscopePushOptions& options);

class PyroscopePusher {
 public:
  // Validates the options and starts the worker thread.
  static absl::StatusOr<std::unique_ptr<PyroscopePusher>> Create(PyroscopePushOptions options);

  // Shutdown(absl::Now()) if Shutdown was not called.
  ~PyroscopePusher();
  PyroscopePusher(const PyroscopePusher&) = delete;
  PyroscopePusher& operator=(const PyroscopePusher&) = delete;

  // Encodes the window as a gzipped pprof on the caller's thread and queues
  // it; returns without waiting for the network. `start`/`end` become
  // from/until; the sample rate comes from profile.sample_rate_hz. When the
  // queue is full the oldest queued window is dropped (and counted). Errors:
  // FailedPrecondition after Shutdown, or the encoder's error.
  absl::Status Push(const Profile& profile, absl::Time start, absl::Time end);

  PushStats Stats() const;

  // Stops taking windows and tries to send the queued ones until `deadline`
  // (requests and backoffs are cut to it); whatever is left then is counted
  // dropped_shutdown. Joins the worker. Idempotent.
  void Shutdown(absl::Time deadline);

 private:
  struct Window {
    std::string profile_gz;
    absl::Time start;
    absl::Time end;
    int sample_rate_hz = 0;
    bool resident_growth = false;  // Profile::count_unit "bytes"
  };

  PyroscopePusher(PyroscopePushOptions options, HttpUrl url, std::unique_ptr<HttpClient> client);
  void Run();
  // Sends one window with its retries. False when the shutdown deadline cut
  // it short (the window is then counted by the caller).
  bool SendWithRetries(const Window& window);
  // Waits until `until`, or less when the shutdown deadline comes first.
  // False when the deadline cut the wait short.
  bool SleepUntil(absl::Time until);

  const PyroscopePushOptions options_;
  const HttpUrl url_;
  const std::unique_ptr<HttpClient> client_;  // used by the worker only

  mutable absl::Mutex mu_;
  std::deque<Window> queue_ ABSL_GUARDED_BY(mu_);
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time shutdown_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  PushStats stats_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 random_ ABSL_GUARDED_BY(mu_);

  // Shutdown's deadline, seen by a request in flight.
  SharedDeadline cutoff_;
  absl::Mutex shutdown_mu_;  // serializes Shutdown callers around the join
  std::thread worker_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_PYROSCOPE_PUSHER_H_

// Pushes each window's profile to a profile store with Pyroscope's ingest API
// (POST /ingest), from a worker thread, with a bounded queue and retries
// (exporters/push_queue.h, shared with the OTLP push).
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
// Outcomes (PushStats): sent (2xx), rejected (any other 4xx than 408/429:
// retrying cannot help), failed (retries used up on connection errors,
// timeouts, 408, 429 and 5xx), and the queue's drops.
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
#include "exporters/push_queue.h"
#include "model/profile.h"

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

  // Timeout, queue bound, attempts and backoff: the queue's part.
  PushRetryPolicy policy;
};

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
  PyroscopePusher(PyroscopePushOptions options, HttpUrl url, std::unique_ptr<HttpClient> client);
  // What the store's answer means for the window.
  PushVerdict Judge(const HttpResponse& response) const;

  const PyroscopePushOptions options_;
  const HttpUrl url_;
  absl::Mutex random_mu_;
  std::mt19937_64 random_ ABSL_GUARDED_BY(random_mu_);  // multipart boundaries
  PushQueue queue_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_PYROSCOPE_PUSHER_H_

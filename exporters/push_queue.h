// The machinery every push to a store shares (Pyroscope's ingest, OTLP over
// HTTP or gRPC): a bounded queue of ready requests, one worker thread that
// sends them with retries, backoff and Retry-After, a shutdown deadline that
// cuts requests and backoffs short, and the counters of every outcome. What a
// request holds and what an answer means is the protocol's (PushJudge).
//
// Outcomes, every window counted once: sent (the store took it, maybe in
// part: rejected_items counts what it refused), rejected (an answer that
// retrying cannot change), failed (retries used up), dropped_queue_full (the
// oldest queued window, when a new one arrives and the queue is full),
// dropped_shutdown (still queued when Shutdown's deadline passed). Every
// failed attempt is also counted by reason (PushErrorReason).
#ifndef PYSTROBE_EXPORTERS_PUSH_QUEUE_H_
#define PYSTROBE_EXPORTERS_PUSH_QUEUE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "exporters/http_client.h"

namespace pystrobe {

// Why an attempt failed: one table for the enum, the metric's label values
// and their order. X(enumerator, label).
#define PYSTROBE_PUSH_ERROR_REASONS(X)                                          \
  X(kConnect, "connect")        /* the host or proxy unresolved or unreached */ \
  X(kTls, "tls")                /* certificate refused, handshake failed */     \
  X(kTimeout, "timeout")        /* no complete answer within the timeout */     \
  X(kConnectionLost, "network") /* the connection broke, or no HTTP answer */   \
  X(kHttpStatus, "http_status") /* an answer other than 2xx */                  \
  X(kGrpcStatus, "grpc_status") /* a gRPC answer other than OK */               \
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

// Counters since the queue was created, for the daemon's metrics.
struct PushStats {
  uint64_t enqueued = 0;            // windows accepted
  uint64_t sent = 0;                // taken by the store (in whole or in part)
  uint64_t retried = 0;             // retries (attempts after the first)
  uint64_t dropped_queue_full = 0;  // pushed out of a full queue
  uint64_t dropped_shutdown = 0;    // abandoned at Shutdown's deadline
  uint64_t rejected = 0;            // refused in a way retrying cannot change
  uint64_t failed = 0;              // retries exhausted
  uint64_t queued = 0;              // waiting now, including one being sent
  uint64_t bytes_sent = 0;          // request bodies of windows sent
  // Items (OTLP profiles) the store refused from windows it otherwise took:
  // OTLP's partial_success.rejected_profiles.
  uint64_t rejected_items = 0;
  // Failed attempts (retried or not), by PushErrorReason.
  std::array<uint64_t, kPushErrorReasons> errors{};
  // The last error (empty when the last attempt succeeded), for logs.
  std::string last_error;
};

// How hard to try.
struct PushRetryPolicy {
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

// Checks the ranges; `what` prefixes the messages ("push", "otlp").
absl::Status ValidatePushRetryPolicy(const PushRetryPolicy& policy, std::string_view what);

// The backoff before retry `retry` (1 for the first retry), for `uniform` in
// [0, 1). Without Retry-After.
absl::Duration PushBackoff(const PushRetryPolicy& policy, int retry, double uniform);

// A Retry-After value: delay-seconds or an HTTP-date (RFC 9110), relative to
// `now`. nullopt when it is neither.
std::optional<absl::Duration> ParseRetryAfter(std::string_view value, absl::Time now);

// The start of a response body on one line, for an error message.
std::string ShortResponseBody(std::string_view body);

// What an answer means for the window it carried.
struct PushVerdict {
  enum class Outcome {
    kSent,      // taken (rejected_items: the part refused)
    kRejected,  // refused; retrying cannot help
    kRetry,     // try again after the backoff, or retry_after when given
  };
  Outcome outcome = Outcome::kSent;
  PushErrorReason reason = PushErrorReason::kHttpStatus;  // kRejected, kRetry
  std::string error;                                      // kRejected, kRetry; for logs
  std::optional<absl::Duration> retry_after;
  uint64_t rejected_items = 0;
};

// Judges a response (any HTTP status) of the request `request`.
using PushJudge =
    std::function<PushVerdict(const HttpRequest& request, const HttpResponse& response)>;

class PushQueue {
 public:
  // Starts the worker thread. `policy` must have passed ValidatePushRetryPolicy.
  PushQueue(PushRetryPolicy policy, std::unique_ptr<HttpClient> client, PushJudge judge);
  // Shutdown(absl::Now()) if Shutdown was not called.
  ~PushQueue();
  PushQueue(const PushQueue&) = delete;
  PushQueue& operator=(const PushQueue&) = delete;

  // Queues a ready request; returns without waiting for the network. When
  // the queue is full the oldest queued window is dropped (and counted).
  // FailedPrecondition after Shutdown.
  absl::Status Enqueue(HttpRequest request);

  bool stopping() const;
  PushStats Stats() const;

  // Stops taking windows and tries to send the queued ones until `deadline`
  // (requests and backoffs are cut to it); whatever is left then is counted
  // dropped_shutdown. Joins the worker. Idempotent.
  void Shutdown(absl::Time deadline);

 private:
  void Run();
  // Sends one request with its retries. False when the shutdown deadline cut
  // it short (the window is then counted by the caller).
  bool SendWithRetries(const HttpRequest& request);
  // Waits until `until`, or less when the shutdown deadline comes first.
  // False when the deadline cut the wait short.
  bool SleepUntil(absl::Time until);

  const PushRetryPolicy policy_;
  const std::unique_ptr<HttpClient> client_;  // used by the worker only
  const PushJudge judge_;

  mutable absl::Mutex mu_;
  std::deque<HttpRequest> queue_ ABSL_GUARDED_BY(mu_);
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

#endif  // PYSTROBE_EXPORTERS_PUSH_QUEUE_H_

#include "exporters/push_queue.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

namespace pystrobe {

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

std::string ShortResponseBody(std::string_view body) {
  std::string text(body.substr(0, 200));
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return std::string(absl::StripAsciiWhitespace(text));
}

absl::Status ValidatePushRetryPolicy(const PushRetryPolicy& policy, std::string_view what_in) {
  absl::string_view what(what_in.data(), what_in.size());
  if (policy.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the timeout must be positive"));
  }
  if (policy.max_queue < 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": max_queue must be >= 1"));
  }
  if (policy.max_attempts < 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": max_attempts must be >= 1"));
  }
  if (policy.initial_backoff < absl::ZeroDuration() ||
      policy.max_backoff < policy.initial_backoff) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": need 0 <= initial_backoff <= max_backoff"));
  }
  if (!(policy.jitter >= 0.0 && policy.jitter <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": jitter must be in [0, 1]"));
  }
  return absl::OkStatus();
}

absl::Duration PushBackoff(const PushRetryPolicy& policy, int retry, double uniform) {
  absl::Duration base = policy.initial_backoff;
  for (int i = 1; i < retry && base < policy.max_backoff; ++i) base *= 2;
  base = std::min(base, policy.max_backoff);
  double factor = 1.0 - policy.jitter * std::clamp(uniform, 0.0, 1.0);
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

PushQueue::PushQueue(PushRetryPolicy policy, std::unique_ptr<HttpClient> client, PushJudge judge)
    : policy_(std::move(policy)),
      client_(std::move(client)),
      judge_(std::move(judge)),
      random_(std::random_device{}()) {
  worker_ = std::thread([this] { Run(); });
}

PushQueue::~PushQueue() { Shutdown(absl::Now()); }

absl::Status PushQueue::Enqueue(HttpRequest request) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::FailedPreconditionError("push: the pusher is shut down");
  ++stats_.enqueued;
  if (queue_.size() >= static_cast<size_t>(policy_.max_queue)) {
    queue_.pop_front();
    ++stats_.dropped_queue_full;
  }
  queue_.push_back(std::move(request));
  return absl::OkStatus();
}

bool PushQueue::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

PushStats PushQueue::Stats() const {
  absl::MutexLock lock(&mu_);
  PushStats stats = stats_;
  stats.queued = queue_.size() + (in_flight_ ? 1 : 0);
  return stats;
}

void PushQueue::Shutdown(absl::Time deadline) {
  absl::MutexLock join_lock(&shutdown_mu_);
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    shutdown_deadline_ = std::min(shutdown_deadline_, deadline);
  }
  cutoff_.BringForward(deadline);
  if (worker_.joinable()) worker_.join();
}

void PushQueue::Run() {
  while (true) {
    HttpRequest request;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](PushQueue* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return self->stopping_ || !self->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping, nothing left
      if (stopping_ && absl::Now() >= shutdown_deadline_) {
        stats_.dropped_shutdown += queue_.size();
        queue_.clear();
        return;
      }
      request = std::move(queue_.front());
      queue_.pop_front();
      in_flight_ = true;
    }
    bool completed = SendWithRetries(request);
    absl::MutexLock lock(&mu_);
    in_flight_ = false;
    if (!completed) ++stats_.dropped_shutdown;
  }
}

bool PushQueue::SendWithRetries(const HttpRequest& request) {
  for (int attempt = 1;; ++attempt) {
    {
      absl::MutexLock lock(&mu_);
      if (attempt > 1) ++stats_.retried;
      if (stopping_ && absl::Now() >= shutdown_deadline_) return false;
    }
    absl::StatusOr<HttpResponse> response = client_->Send(request, policy_.timeout, &cutoff_);
    if (!response.ok() && response.status().code() == absl::StatusCode::kCancelled) {
      return false;  // Shutdown's deadline: not a failure of the store
    }

    PushVerdict verdict;
    if (response.ok()) {
      verdict = judge_(request, *response);
    } else {
      verdict.outcome = PushVerdict::Outcome::kRetry;
      verdict.error = std::string(response.status().message());
      verdict.reason = PushErrorReasonOf(response.status());
    }

    absl::Duration delay;
    {
      absl::MutexLock lock(&mu_);
      switch (verdict.outcome) {
        case PushVerdict::Outcome::kSent:
          ++stats_.sent;
          stats_.bytes_sent += request.body.size();
          stats_.rejected_items += verdict.rejected_items;
          // A partial success's message is worth a log line, not an error.
          stats_.last_error = std::move(verdict.error);
          return true;
        case PushVerdict::Outcome::kRejected:
          ++stats_.errors[static_cast<size_t>(verdict.reason)];
          ++stats_.rejected;
          stats_.last_error = std::move(verdict.error);
          return true;
        case PushVerdict::Outcome::kRetry:
          break;
      }
      ++stats_.errors[static_cast<size_t>(verdict.reason)];
      stats_.last_error = verdict.error;
      if (attempt >= policy_.max_attempts) {
        ++stats_.failed;
        return true;
      }
      if (stopping_ && absl::Now() >= shutdown_deadline_) return false;
      delay = PushBackoff(policy_, attempt, std::uniform_real_distribution<double>(0, 1)(random_));
    }
    if (verdict.retry_after) {
      delay = std::max(delay, std::min(*verdict.retry_after, policy_.max_retry_after));
    }
    if (!SleepUntil(absl::Now() + delay)) return false;
  }
}

bool PushQueue::SleepUntil(absl::Time until) {
  absl::MutexLock lock(&mu_);
  while (true) {
    absl::Time now = absl::Now();
    if (now >= shutdown_deadline_) return false;
    if (now >= until) return true;
    std::pair<PushQueue*, absl::Time> seen(this, shutdown_deadline_);
    // Wakes early when Shutdown brings the deadline forward.
    mu_.AwaitWithDeadline(
        absl::Condition(
            +[](std::pair<PushQueue*, absl::Time>* arg) ABSL_NO_THREAD_SAFETY_ANALYSIS {
              return arg->first->shutdown_deadline_ != arg->second;
            },
            &seen),
        std::min(until, shutdown_deadline_));
  }
}

}  // namespace pystrobe

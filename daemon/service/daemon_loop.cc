#include "daemon/service/daemon_loop.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/service/container_labels.h"
#include "daemon/service/control_server.h"
#include "daemon/service/loop_wakeups.h"
#include "daemon/service/metrics_server.h"
#include "daemon/service/metrics_snapshot.h"
#include "daemon/service/otlp_sink.h"
#include "daemon/service/profile_directory.h"
#include "daemon/service/profile_pages.h"
#include "daemon/service/profiling_session.h"
#include "daemon/service/push_sink.h"
#include "daemon/service/recent_windows.h"
#include "daemon/service/sd_notify.h"
#include "daemon/service/self_metrics.h"
#include "daemon/service/signals.h"

namespace pystrobe {
namespace {

// The loop sleeps until something wakes it (LoopWakeups) or its next timer:
// the 1 s tick of metrics and accounting, the window's cut, the watchdog.
// While recordings or stat/top answers are under way it serves them this
// often; most samples do not wake the reader (see bpf/sample.bpf.h) and are
// read in one batch at each wakeup.
constexpr absl::Duration kServingInterval = absl::Milliseconds(50);
constexpr absl::Duration kTickInterval = absl::Seconds(1);
// How long a scrape waits for the loop to make fresh metrics: the loop
// answers within milliseconds, unless it is cutting a window (naming a
// window's stacks on a busy host takes a while); past this the scrape gets
// the figures published last. Prometheus's own scrape timeout is 10 s.
constexpr absl::Duration kScrapeWait = absl::Seconds(2);
// How long the last window, once queued after SIGTERM, may take to reach the
// profile stores. Counted from when it is queued, not from the signal: on a
// loaded host cutting and naming the window can itself take a second, and a
// grace spent before the window exists pushes nothing.
constexpr absl::Duration kFinalPushGrace = absl::Milliseconds(1500);

void Log(const std::string& message) {
  fprintf(stderr, "pystrobe daemon: %s\n", message.c_str());
  fflush(stderr);
}

// systemd's notifications are best effort: a failure is logged once per kind.
void Notify(const absl::Status& status) {
  static std::atomic<bool> logged{false};
  if (!status.ok() && !logged.exchange(true)) {
    Log(absl::StrCat("warning: sd_notify: ", status.message()));
  }
}

// The daemon between sessions: what outlives a reload.
class Daemon {
 public:
  Daemon(DaemonSources sources, DaemonConfig config)
      : sources_(std::move(sources)), config_(config) {}
  // A scrape on the metrics server's thread must not wake a loop that is
  // gone, nor a signal handler.
  ~Daemon() {
    snapshot_->set_refresh(nullptr, absl::ZeroDuration());
    Signals::WakeOnSignal(nullptr);
  }

  absl::Status Run();

 private:
  absl::Status StartSession();
  void Reload();
  void PublishHealth();
  void ConfigurePush(const DaemonConfig& config);
  void LogPushErrors();
  std::string ReadyStatus() const;

  DaemonSources sources_;
  DaemonConfig config_;
  std::shared_ptr<MetricsSnapshot> snapshot_ = std::make_shared<MetricsSnapshot>();
  // The last windows, for the pages served beside /metrics.
  std::shared_ptr<RecentWindows> recent_windows_ = std::make_shared<RecentWindows>();
  std::shared_ptr<const ProfilePages> pages_ = std::make_shared<ProfilePages>(recent_windows_);
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<ProfileDirectory> profile_dir_;
  PushSink push_sink_;
  OtlpSink otlp_sink_;
  std::unique_ptr<ContainerLabels> labels_;
  std::unique_ptr<LoopWakeups> wakeups_;
  std::unique_ptr<ProfilingSession> session_;
  std::unique_ptr<ControlServer> control_;
  uint64_t next_sequence_ = 1;
  uint64_t reloads_ = 0;
  uint64_t reload_errors_ = 0;
  // Per exporter: the last error logged (empty once it worked again), and
  // the windows sent when it was last seen failing.
  struct PushErrorLog {
    std::string last_error;
    uint64_t sent_at_error = 0;
  };
  PushErrorLog push_errors_;
  PushErrorLog otlp_errors_;
};

absl::Status Daemon::StartSession() {
  absl::StatusOr<std::unique_ptr<ProfilingSession>> session = ProfilingSession::Start(
      config_, {profile_dir_.get(), &push_sink_, &otlp_sink_, recent_windows_.get()}, labels_.get(),
      next_sequence_);
  if (!session.ok()) return session.status();
  session_ = std::move(*session);
  if (absl::Status s = wakeups_->Watch(session_->ring_buffer_fd()); !s.ok()) {
    // Still correct, only slower to see a new process: the tick drains too.
    Log(absl::StrCat("warning: new processes wait for the next tick: ", s.message()));
  }
  Log(absl::StrCat(
      "profiling ", config_.targets.all ? "every process" : "the configured targets", " at ",
      config_.rate_hz, " Hz in windows of ", absl::FormatDuration(config_.window), "; profiles in ",
      profile_dir_->dir(), "; metrics on http://", config_.exporters.prometheus.listen, "/metrics",
      push_sink_.active() ? absl::StrCat("; pushing to ", config_.exporters.push.url) : "",
      otlp_sink_.active() ? absl::StrCat("; exporting OTLP (", config_.exporters.otlp.protocol,
                                         ") to ", config_.exporters.otlp.endpoint)
                          : ""));
  return absl::OkStatus();
}

void Daemon::Reload() {
  absl::StatusOr<DaemonConfig> loaded =
      LoadEffectiveConfig(sources_.config_path, sources_.overrides);
  if (!loaded.ok()) {
    ++reload_errors_;
    Log(absl::StrCat("SIGHUP: configuration rejected, the running one stays:\n",
                     loaded.status().message()));
    return;
  }
  DaemonConfig next = *loaded;
  if (next.exporters.prometheus.listen != config_.exporters.prometheus.listen) {
    metrics_server_.reset();  // free the old port first: the new one may be the same
    absl::StatusOr<std::unique_ptr<MetricsServer>> server =
        MetricsServer::Start(next.exporters.prometheus.listen, snapshot_, pages_);
    if (!server.ok()) {
      Log(absl::StrCat("SIGHUP: ", server.status().message(), "; keeping ",
                       config_.exporters.prometheus.listen));
      next.exporters.prometheus.listen = config_.exporters.prometheus.listen;
      server = MetricsServer::Start(next.exporters.prometheus.listen, snapshot_, pages_);
    }
    if (server.ok()) metrics_server_ = std::move(*server);
  }
  if (next.exporters.profile_dir != config_.exporters.profile_dir) {
    auto dir =
        std::make_unique<ProfileDirectory>(next.exporters.profile_dir, next.exporters.retention);
    if (absl::Status s = dir->Open(); !s.ok()) {
      Log(absl::StrCat("SIGHUP: ", s.message(), "; keeping ", config_.exporters.profile_dir));
      next.exporters.profile_dir = config_.exporters.profile_dir;
    } else {
      // The session writes to the new directory from its next window.
      if (session_ != nullptr) session_->MaybeCut(absl::Now(), /*force=*/true);
      next_sequence_ = session_ != nullptr ? session_->next_sequence() : next_sequence_;
      bool restart = session_ != nullptr;
      session_.reset();
      profile_dir_ = std::move(dir);
      ConfigurePush(next);
      if (restart) {
        config_ = next;
        if (absl::Status s = StartSession(); !s.ok()) {
          Log(absl::StrCat("SIGHUP: ", s.message()));
          Signals::RequestStop(SIGTERM);
        }
        ++reloads_;
        Log("SIGHUP: configuration applied");
        return;
      }
    }
  }
  profile_dir_->set_retention(next.exporters.retention);
  ConfigurePush(next);
  ++reloads_;
  if (session_ != nullptr && NeedsNewSession(config_, next)) {
    session_->Finish(absl::Now());
    next_sequence_ = session_->next_sequence();
    ProcessMetrics::OomKills oom_kills = session_->process_metrics().oom_kills();
    session_.reset();
    config_ = next;
    if (absl::Status s = StartSession(); !s.ok()) {
      Log(absl::StrCat("SIGHUP: cannot start with the new configuration: ", s.message()));
      Signals::RequestStop(SIGTERM);
      return;
    }
    session_->process_metrics().AddOomKills(oom_kills);
  } else {
    config_ = next;
    if (session_ != nullptr) session_->Apply(config_);
  }
  Log(absl::StrCat("SIGHUP: configuration applied (window ", absl::FormatDuration(config_.window),
                   ", rate ", config_.rate_hz, " Hz)"));
}

std::string Daemon::ReadyStatus() const {
  return absl::StrCat("profiling at ", config_.rate_hz, " Hz, windows of ",
                      absl::FormatDuration(config_.window));
}

void Daemon::ConfigurePush(const DaemonConfig& config) {
  if (absl::Status s = push_sink_.Configure(config); !s.ok()) Log(std::string(s.message()));
  if (absl::Status s = otlp_sink_.Configure(config); !s.ok()) Log(std::string(s.message()));
}

void Daemon::LogPushErrors() {
  // A line when an export starts failing, when the reason changes, and when
  // a window goes through again; every failure is counted in
  // pystrobe_push_errors_total. Errors name the URL, never a credential.
  auto log = [this](const char* what, const std::string& error_now, uint64_t sent,
                    PushErrorLog& state) {
    if (!error_now.empty() && error_now != state.last_error) {
      // A partial success (OTLP) is the store's word on a window it took.
      bool partial = absl::StartsWith(error_now, "partial success");
      Log(absl::StrCat(what, partial ? ": " : " failed: ", error_now));
      state.last_error = error_now;
    } else if (error_now.empty() && !state.last_error.empty() && sent > state.sent_at_error) {
      Log(absl::StrCat(what, ": sending again"));
      state.last_error.clear();
    }
    if (!state.last_error.empty() && error_now == state.last_error) state.sent_at_error = sent;
  };
  log("push", push_sink_.LastError(), push_sink_.Health().sent, push_errors_);
  log("otlp", otlp_sink_.LastError(), otlp_sink_.Health().sent, otlp_errors_);
}

void Daemon::PublishHealth() {
  DaemonHealth health;
  if (session_ != nullptr) session_->FillHealth(health);
  ProfileDirectory::Stats dir = profile_dir_->stats();
  health.profile_files_deleted_age = dir.files_deleted_age;
  health.profile_files_deleted_size = dir.files_deleted_size;
  health.profile_files = dir.files;
  health.profile_dir_bytes = dir.total_bytes;
  health.push = push_sink_.Health();
  health.otlp = otlp_sink_.Health();
  if (control_ != nullptr) health.control = control_->stats();
  health.config_reloads = reloads_;
  health.config_reload_errors = reload_errors_;
  health.memory_limit_bytes = config_.limits.memory_bytes;
  health.window_seconds = absl::ToDoubleSeconds(config_.window);
  health.rate_hz = config_.rate_hz;
  health.usage = ReadSelfUsage();
  snapshot_->Publish("self", SelfMetricFamilies(health, config_.labels));
  if (session_ != nullptr) {
    snapshot_->Publish("processes", session_->process_metrics().Families());
    snapshot_->Publish("gpu", session_->gpu_metrics().Families());
  }
  snapshot_->MarkFresh();
}

absl::Status Daemon::Run() {
  profile_dir_ = std::make_unique<ProfileDirectory>(config_.exporters.profile_dir,
                                                    config_.exporters.retention);
  if (absl::Status s = profile_dir_->Open(); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start(config_.exporters.prometheus.listen, snapshot_, pages_);
  if (!server.ok()) {
    return server.status();
  }
  metrics_server_ = std::move(*server);
  absl::StatusOr<std::unique_ptr<CgroupResolver>> resolver = CgroupResolver::Create({});
  if (!resolver.ok()) {
    Log(absl::StrCat("warning: no cgroup labels: ", resolver.status().message()));
  }
  labels_ = std::make_unique<ContainerLabels>(resolver.ok() ? std::move(*resolver) : nullptr);
  ConfigurePush(config_);
  absl::StatusOr<std::unique_ptr<LoopWakeups>> wakeups = LoopWakeups::Create();
  if (!wakeups.ok()) {
    return wakeups.status();
  }
  wakeups_ = std::move(*wakeups);
  Signals::WakeOnSignal(wakeups_.get());
  snapshot_->set_refresh([wakeups = wakeups_.get()] { wakeups->Wake(); }, kScrapeWait);

  if (absl::Status s = StartSession(); !s.ok()) {
    return s;
  }
  PublishHealth();
  absl::StatusOr<std::unique_ptr<ControlServer>> control =
      ControlServer::Start(sources_.socket_path);
  if (control.ok()) {
    control_ = std::move(*control);
    control_->set_on_job([wakeups = wakeups_.get()] { wakeups->Wake(); });
  } else {
    Log(absl::StrCat("warning: no control socket (record/top/stat load their own BPF): ",
                     control.status().message()));
  }
  // Sampling has started: systemd may consider the unit up.
  Notify(NotifyReady(ReadyStatus()));
  // WatchdogSec=: ping at half the interval, from this loop, whose progress
  // is what matters.
  std::optional<absl::Duration> watchdog = WatchdogInterval();
  absl::Time next_watchdog = absl::Now();
  absl::Time next_tick = absl::Now() + kTickInterval;
  while (!Signals::StopRequested()) {
    absl::Time wake_at = std::min(next_tick, session_->next_cut());
    if (watchdog) wake_at = std::min(wake_at, next_watchdog);
    if (session_->serving_requests()) wake_at = std::min(wake_at, absl::Now() + kServingInterval);
    wakeups_->Wait(wake_at - absl::Now());
    if (absl::Status s = session_->Drain(); !s.ok()) {
      Log(absl::StrCat(s.message(), "; stopping"));
      break;
    }
    absl::Time now = absl::Now();
    if (control_ != nullptr) {
      for (std::shared_ptr<RecordJob>& job : control_->TakeJobs()) {
        session_->BeginRecording(std::move(job), now);
      }
      session_->ServeRecordings(now);
    }
    if (Signals::TakeReloadRequest()) {
      Notify(NotifyReloading());
      Reload();
      if (Signals::StopRequested()) break;
      Notify(NotifyReady(ReadyStatus()));
    }
    if (watchdog && now >= next_watchdog) {
      next_watchdog = now + *watchdog / 2;
      Notify(NotifyWatchdog());
    }
    if (now >= next_tick) {
      next_tick = now + kTickInterval;
      session_->Tick(now);
      LogPushErrors();
    }
    // Metrics are made for the scrape that asked, not every tick.
    if (snapshot_->TakeRefreshRequest()) PublishHealth();
    session_->MaybeCut(now);
  }
  absl::Time stopping = absl::Now();
  Notify(NotifyStopping());
  if (session_ != nullptr) session_->Finish(stopping);
  // The last window is queued: both stores' pushers send it side by side
  // (each has its own thread) within the one grace.
  const absl::Time final_push_deadline = absl::Now() + kFinalPushGrace;
  push_sink_.Shutdown(final_push_deadline);
  otlp_sink_.Shutdown(final_push_deadline);
  control_.reset();  // the recordings were completed by Finish
  PublishHealth();
  Log(absl::StrCat("stopped by signal ", Signals::StopSignal(), "; last window written"));
  Signals::WakeOnSignal(nullptr);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunDaemon(const DaemonSources& sources, const DaemonConfig& config) {
  Daemon daemon(sources, config);
  return daemon.Run();
}

}  // namespace pystrobe

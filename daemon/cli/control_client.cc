#include "daemon/cli/control_client.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/cli/exit_status.h"
#include "daemon/service/signals.h"

namespace pystrobe {
namespace {

// The largest profile a client accepts from the daemon.
constexpr size_t kMaxProfileBytes = size_t{1} << 30;
// The largest stat or top answer.
constexpr size_t kMaxResultBytes = size_t{256} << 20;

// Reads exactly `size` bytes; while waiting, sends kStop once when `stop` is
// set. False on EOF or error.
bool Receive(int fd, size_t size, std::string& out, const std::atomic<int>* stop, bool& stop_sent,
             const std::function<void()>& waiting = {}) {
  out.resize(size);
  size_t got = 0;
  while (got < size) {
    if (stop != nullptr && stop->load() != 0 && !stop_sent) {
      stop_sent = true;
      SendFrame(fd, ControlMessageType::kStop, "");
    }
    pollfd p = {fd, POLLIN, 0};
    int ready = poll(&p, 1, 100);
    if (ready < 0 && errno != EINTR) return false;
    if (ready <= 0) {
      if (waiting) waiting();
      continue;
    }
    ssize_t n = recv(fd, out.data() + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

bool HasExplicitRate(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "-r" || arg == "--rate" || absl::StartsWith(arg, "--rate=")) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<DaemonClientFlags> TakeDaemonClientFlags(std::vector<std::string>& args) {
  DaemonClientFlags flags;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {  // the command's own arguments
      rest.insert(rest.end(), args.begin() + static_cast<long>(i), args.end());
      break;
    }
    if (arg == "--no-daemon") {
      flags.no_daemon = true;
    } else if (arg == "--socket") {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError("--socket needs a PATH");
      flags.socket = args[++i];
    } else if (absl::StartsWith(arg, "--socket=")) {
      flags.socket = arg.substr(strlen("--socket="));
    } else {
      rest.push_back(arg);
    }
  }
  args = std::move(rest);
  return flags;
}

absl::StatusOr<int> ConnectToDaemon(const std::string& path) {
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  memcpy(address.sun_path, path.c_str(), path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(strerror(errno));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    absl::Status status = absl::UnavailableError(absl::StrCat(path, ": ", strerror(errno)));
    close(fd);
    return status;
  }
  return fd;
}

absl::StatusOr<Profile> RecordThroughDaemon(int fd, const RecordRequest& request,
                                            const std::function<void(const std::string&)>& info,
                                            const std::atomic<int>* stop) {
  if (!SendFrame(fd, ControlMessageType::kRecord, EncodeRecordRequest(request))) {
    return absl::UnavailableError("the daemon closed the connection");
  }
  std::string encoded;
  bool stop_sent = false;
  while (true) {
    std::string header_bytes, payload;
    if (!Receive(fd, kControlHeaderSize, header_bytes, stop, stop_sent)) {
      return absl::UnavailableError("the daemon closed the connection before the profile");
    }
    absl::StatusOr<ControlHeader> header = ParseHeader(header_bytes, kMaxResponsePayload);
    if (!header.ok()) return header.status();
    if (!Receive(fd, header->length, payload, stop, stop_sent)) {
      return absl::UnavailableError("the daemon's answer is truncated");
    }
    switch (static_cast<ControlMessageType>(header->type)) {
      case ControlMessageType::kInfo:
        info(payload);
        break;
      case ControlMessageType::kError:
        return absl::FailedPreconditionError(payload);
      case ControlMessageType::kProfileChunk:
        if (encoded.size() + payload.size() > kMaxProfileBytes) {
          return absl::ResourceExhaustedError("the daemon's profile is too large");
        }
        encoded += payload;
        break;
      case ControlMessageType::kDone:
        return DecodeProfile(encoded);
      default:
        return absl::DataLossError(absl::StrCat("unexpected message type ", header->type));
    }
  }
}

absl::StatusOr<std::string> RequestThroughDaemon(
    int fd, ControlMessageType type, const std::string& payload,
    const std::function<void(const std::string&)>& info, const std::atomic<int>* stop,
    const std::function<void()>& waiting) {
  if (!SendFrame(fd, type, payload)) {
    return absl::UnavailableError("the daemon closed the connection");
  }
  std::string result;
  bool stop_sent = false;
  while (true) {
    std::string header_bytes, chunk;
    if (!Receive(fd, kControlHeaderSize, header_bytes, stop, stop_sent, waiting)) {
      return absl::UnavailableError("the daemon closed the connection before answering");
    }
    absl::StatusOr<ControlHeader> header = ParseHeader(header_bytes, kMaxResponsePayload);
    if (!header.ok()) return header.status();
    if (!Receive(fd, header->length, chunk, stop, stop_sent, waiting)) {
      return absl::UnavailableError("the daemon's answer is truncated");
    }
    switch (static_cast<ControlMessageType>(header->type)) {
      case ControlMessageType::kInfo:
        info(chunk);
        break;
      case ControlMessageType::kError:
        return absl::FailedPreconditionError(chunk);
      case ControlMessageType::kResult:
        if (result.size() + chunk.size() > kMaxResultBytes) {
          return absl::ResourceExhaustedError("the daemon's answer is too large");
        }
        result += chunk;
        break;
      case ControlMessageType::kDone:
        return result;
      default:
        return absl::DataLossError(absl::StrCat("unexpected message type ", header->type));
    }
  }
}

std::optional<int> MaybeRecordThroughDaemon(const RecordOptions& options,
                                            const DaemonClientFlags& flags,
                                            const std::vector<std::string>& args,
                                            const ProfileWriter& writer) {
  // The daemon's recordings are CPU profiles; an import tree and resident
  // growth are made here. The summary's counters are a local sampler's; a
  // daemon's are its metrics.
  if (flags.no_daemon || !options.command.empty() || options.subprocesses || options.imports ||
      options.memory || options.allocations || !options.summary_json.empty()) {
    return std::nullopt;
  }
  absl::StatusOr<int> fd = ConnectToDaemon(flags.socket);
  if (!fd.ok()) return std::nullopt;
  fprintf(stderr, "pystrobe: using the running daemon (%s)\n", flags.socket.c_str());

  RecordRequest request;
  request.pids = options.pids;
  request.all = options.all;
  request.duration = options.duration;
  if (HasExplicitRate(args)) request.rate_hz = options.rate_hz;
  request.threads = options.threads;
  request.native = options.native;
  request.gil_only = options.gil_only;
  request.offcpu = options.offcpu;
  request.idle = options.idle;
  request.function_lines = options.function_lines;
  request.no_line_numbers = options.no_line_numbers;
  request.full_filenames = options.full_filenames;

  std::string output = options.output.empty() ? DefaultOutputPath(options, absl::Now(),
                                                                  std::string(writer.extension()))
                                              : options.output;
  std::ofstream out(output, std::ios::binary | std::ios::trunc);
  if (!out) {
    close(*fd);
    fprintf(stderr, "pystrobe record: cannot write %s\n", output.c_str());
    return kExitFailure;
  }
  Signals::Install();
  fprintf(stderr, "pystrobe: recording %s through the daemon; Ctrl-C to stop\n",
          options.all ? "all processes" : "the pids");
  absl::Time start = absl::Now();
  absl::StatusOr<Profile> profile = RecordThroughDaemon(
      *fd, request,
      [](const std::string& line) { fprintf(stderr, "pystrobe: %s\n", line.c_str()); },
      &Signals::stop_flag());
  close(*fd);
  if (!profile.ok()) {
    fprintf(stderr, "pystrobe record: the daemon (%s): %s\n", flags.socket.c_str(),
            std::string(profile.status().message()).c_str());
    out.close();
    std::error_code ignored;
    std::filesystem::remove(output, ignored);
    return kExitFailure;
  }
  fprintf(stderr, "pystrobe: %llu samples in %.1f s at %d Hz (from the daemon)\n",
          static_cast<unsigned long long>(profile->total_count()),
          absl::ToDoubleSeconds(absl::Now() - start), profile->sample_rate_hz);
  if (absl::Status s = writer.Write(*profile, out); !s.ok()) {
    fprintf(stderr, "pystrobe record: %s\n", std::string(s.message()).c_str());
    return kExitFailure;
  }
  out.close();
  if (!out) {
    fprintf(stderr, "pystrobe record: writing %s failed\n", output.c_str());
    return kExitFailure;
  }
  std::error_code ignored;
  std::filesystem::path written = std::filesystem::absolute(output, ignored);
  fprintf(stderr, "pystrobe: wrote %s\n", written.c_str());
  return kExitOk;
}

}  // namespace pystrobe

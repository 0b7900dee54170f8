// What userspace spends per sample, measured on real records the same way
// every time: `capture` records a corpus of ring buffer records from a live
// sampling session (as root, with the sampled processes running), with what
// naming them needs (tests/bench/replay_corpus.h); `replay` feeds it through
// the path `pystrobe record` takes (Recorder::HandleRecord, then
// ProfileBuilder, then the pprof writer) and prints microseconds per sample.
// Run by tests/bench/run_sample_cost.py; documented in docs/benchmarks.md.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/recording/process_labels.h"
#include "daemon/recording/profile_builder.h"
#include "daemon/recording/recorder.h"
#include "daemon/recording/sampling_session.h"
#include "daemon/recording/time_weighting.h"
#include "daemon/records/record_decoder.h"
#include "exporters/profile_writer.h"
#include "tests/bench/replay_corpus.h"

namespace pystrobe {
namespace {

int Usage() {
  fputs(
      "usage: record_replay_bench capture --out FILE [--seconds N] [--rate HZ] [--off-cpu]\n"
      "                                   [--native] [--pid PID]...   (as root; no --pid: all)\n"
      "       record_replay_bench replay FILE [--rounds N] [--min-python-frames N]\n"
      "                                   [--pprof OUT] [--folded OUT]\n",
      stderr);
  return 2;
}

int Capture(const std::vector<std::string>& args) {
  std::string out;
  int seconds = 10;
  Corpus corpus;
  corpus.rate_hz = 99;
  std::vector<uint32_t> pids;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      static const std::string kNone;
      return i + 1 < args.size() ? args[++i] : kNone;
    };
    uint32_t n = 0;
    if (a == "--out") {
      out = value();
    } else if (a == "--seconds" && absl::SimpleAtoi(value(), &n)) {
      seconds = static_cast<int>(n);
    } else if (a == "--rate" && absl::SimpleAtoi(value(), &n)) {
      corpus.rate_hz = static_cast<int>(n);
    } else if (a == "--off-cpu") {
      corpus.offcpu = true;
    } else if (a == "--native") {
      corpus.native = true;
    } else if (a == "--pid" && absl::SimpleAtoi(value(), &n)) {
      pids.push_back(n);
    } else {
      return Usage();
    }
  }
  if (out.empty()) return Usage();

  // As `record` configures its session (daemon/cli/record_command.cc).
  SamplingSessionConfig config;
  config.sampler.filter_pids = !pids.empty();
  config.sampler.offcpu = corpus.offcpu;
  config.sampler.python_native_stacks = corpus.native;
  config.sampler.native_unwind_bytes = corpus.native ? uint64_t{32} << 20 : 0;
  config.sampler.native_unwind_all = corpus.native;
  config.target_pids = pids;
  config.rate_hz = corpus.rate_hz;
  config.recorder.mean_period_ns = 1'000'000'000ull / static_cast<uint64_t>(corpus.rate_hz);
  config.python = SamplingSessionConfig::PythonDiscovery::kOn;
  config.native_unwind_python_only = !corpus.native;
  config.unwind_cache_directory = "";
  absl::StatusOr<std::unique_ptr<SamplingSession>> session = SamplingSession::Open(config);
  if (!session.ok()) {
    fprintf(stderr, "capture: %s\n", std::string(session.status().message()).c_str());
    return 1;
  }
  (*session)->CaptureInto(&corpus.records);
  absl::Status started = (*session)->Start();
  if (!started.ok()) {
    fprintf(stderr, "capture: %s\n", std::string(started.message()).c_str());
    return 1;
  }
  absl::Time end = absl::Now() + absl::Seconds(seconds);
  while (absl::Now() < end) {
    if (absl::Status s = (*session)->Poll(); !s.ok()) {
      fprintf(stderr, "capture: %s\n", std::string(s.message()).c_str());
      break;
    }
  }
  (*session)->Finish().IgnoreError();
  // Names are taken now, while the processes run.
  SnapshotProcesses(corpus);
  if (absl::Status s = WriteCorpus(corpus, out); !s.ok()) {
    fprintf(stderr, "capture: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  fprintf(stderr, "capture: %zu records, %zu processes named, written to %s\n",
          corpus.records.size(), corpus.processes.size(), out.c_str());
  return 0;
}

// Keeps the records of samples with at least `min_python_frames` Python
// frames, and every record that is not a sample.
void KeepDeepSamples(Corpus& corpus, uint32_t min_python_frames) {
  std::erase_if(corpus.records, [&](const std::vector<uint8_t>& bytes) {
    absl::StatusOr<RingRecord> record = DecodeRingRecord(bytes);
    if (!record.ok()) return false;
    const auto* sample = std::get_if<SampleRecord>(&*record);
    return sample != nullptr && sample->python_frames.size() < min_python_frames;
  });
}

struct CorpusFigures {
  size_t on_cpu = 0, off_cpu = 0, process_events = 0, code_copies = 0, other = 0;
  size_t python_frames = 0, user_frames = 0, kernel_frames = 0;
  size_t samples() const { return on_cpu + off_cpu; }
};

CorpusFigures Describe(const Corpus& corpus) {
  CorpusFigures f;
  for (const std::vector<uint8_t>& bytes : corpus.records) {
    absl::StatusOr<RingRecord> record = DecodeRingRecord(bytes);
    if (!record.ok()) {
      ++f.other;
    } else if (const auto* sample = std::get_if<SampleRecord>(&*record)) {
      (sample->kind == PYSTROBE_EVENT_OFFCPU ? f.off_cpu : f.on_cpu) += 1;
      f.python_frames += sample->python_frames.size();
      f.user_frames += sample->user_ips.size();
      f.kernel_frames += sample->kernel_ips.size();
    } else if (std::holds_alternative<ProcessEventRecord>(*record)) {
      ++f.process_events;
    } else if (std::holds_alternative<PythonCodeCopy>(*record)) {
      ++f.code_copies;
    } else {
      ++f.other;
    }
  }
  return f;
}

std::string NoComm(uint32_t) { return ""; }
uint32_t NoNamespace(uint32_t) { return 0; }

struct RoundTimes {
  double record_us = 0, build_us = 0, write_us = 0;
  size_t distinct_stacks = 0;
  double total() const { return record_us + build_us + write_us; }
};

// One recording's worth: every record into a fresh Recorder, its stacks
// named into a profile, the profile written as pprof.
RoundTimes ReplayOnce(const Corpus& corpus, const KernelSymbolizer* kernel,
                      const ProfileWriter& writer, std::string* pprof, std::string* folded) {
  // The thread's CPU time, not the wall's: on a shared machine the wall
  // clock also counts the time other programs ran instead of this one.
  auto now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
  };
  CorpusSymbolizer symbolizer(corpus);
  CorpusPythonDiscovery python(corpus);
  RoundTimes t;
  double start = now();
  Recorder recorder(&symbolizer, &python,
                    {.mean_period_ns = 1'000'000'000ull / static_cast<uint64_t>(corpus.rate_hz)},
                    NoComm, NoNamespace);
  for (const std::vector<uint8_t>& record : corpus.records) recorder.HandleRecord(record);
  double recorded = now();
  Profile profile;
  profile.title = "replay";
  profile.sample_rate_hz = corpus.rate_hz;
  ProfileBuilder builder(recorder, kernel, {.native = corpus.native});
  AddOnAndOffCpuStacks(recorder.stacks(), recorder.offcpu_stacks(),
                       {.offcpu = corpus.offcpu, .rate_hz = corpus.rate_hz}, builder, profile);
  AddProcessLabels(recorder.processes(), {&recorder.stacks(), &recorder.offcpu_stacks()}, profile);
  double built = now();
  std::ostringstream out;
  writer.Write(profile, out).IgnoreError();
  double written = now();
  if (pprof != nullptr) *pprof = out.str();
  if (folded != nullptr) {
    // The stacks in a stable order, to compare replays of builds.
    std::vector<std::string> lines;
    for (const ProfileStack& stack : profile.stacks()) {
      std::string line;
      for (const Frame& frame : stack.frames) absl::StrAppend(&line, frame.name, ";");
      absl::StrAppend(&line, " ", stack.count, " ", stack.nanoseconds, "\n");
      lines.push_back(std::move(line));
    }
    std::sort(lines.begin(), lines.end());
    for (const std::string& line : lines) folded->append(line);
  }
  t.record_us = recorded - start;
  t.build_us = built - recorded;
  t.write_us = written - built;
  t.distinct_stacks = recorder.stacks().size() + recorder.offcpu_stacks().size();
  return t;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

int Replay(const std::vector<std::string>& args) {
  if (args.empty()) return Usage();
  std::string path = args[0];
  uint32_t rounds = 20, min_python_frames = 0;
  std::string pprof_out, folded_out;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has_value = i + 1 < args.size();
    if (a == "--rounds" && has_value && absl::SimpleAtoi(args[i + 1], &rounds)) {
      ++i;
    } else if (a == "--min-python-frames" && has_value &&
               absl::SimpleAtoi(args[i + 1], &min_python_frames)) {
      ++i;
    } else if (a == "--pprof" && has_value) {
      pprof_out = args[++i];
    } else if (a == "--folded" && has_value) {
      folded_out = args[++i];
    } else {
      return Usage();
    }
  }
  absl::StatusOr<Corpus> corpus = ReadCorpus(path);
  if (!corpus.ok()) {
    fprintf(stderr, "replay: %s\n", std::string(corpus.status().message()).c_str());
    return 1;
  }
  if (min_python_frames > 0) KeepDeepSamples(*corpus, min_python_frames);
  CorpusFigures f = Describe(*corpus);
  if (f.samples() == 0) {
    fprintf(stderr, "replay: no samples in %s\n", path.c_str());
    return 1;
  }
  absl::StatusOr<KernelSymbolizer> kernel = KernelSymbolizer::FromText(corpus->kallsyms);
  absl::StatusOr<std::unique_ptr<ProfileWriter>> writer = MakeProfileWriter("pprof");
  if (!writer.ok()) return 1;
  printf(
      "corpus %s: %zu records: %zu on-CPU and %zu off-CPU samples, %zu process events, %zu code "
      "copies, %zu other; per sample %.1f Python, %.1f user, %.1f kernel frames\n",
      path.c_str(), corpus->records.size(), f.on_cpu, f.off_cpu, f.process_events, f.code_copies,
      f.other, double(f.python_frames) / f.samples(), double(f.user_frames) / f.samples(),
      double(f.kernel_frames) / f.samples());

  std::string pprof, folded;
  size_t distinct_stacks = 0;
  std::vector<double> record_us, build_us, write_us, total_us;
  for (uint32_t round = 0; round < std::max<uint32_t>(rounds, 1); ++round) {
    RoundTimes t = ReplayOnce(*corpus, kernel.ok() ? &*kernel : nullptr, **writer,
                              round == 0 ? &pprof : nullptr, round == 0 ? &folded : nullptr);
    distinct_stacks = t.distinct_stacks;
    record_us.push_back(t.record_us);
    build_us.push_back(t.build_us);
    write_us.push_back(t.write_us);
    total_us.push_back(t.total());
  }
  const double n = static_cast<double>(f.samples());
  printf(
      "CPU us per sample, median of %u rounds: %.2f end to end (decode and record %.2f, build "
      "the profile %.2f, write pprof %.2f); fastest round %.2f; %zu distinct stacks, pprof %zu "
      "bytes\n",
      rounds, Median(total_us) / n, Median(record_us) / n, Median(build_us) / n,
      Median(write_us) / n, *std::min_element(total_us.begin(), total_us.end()) / n,
      distinct_stacks, pprof.size());
  for (const auto& [out, bytes] : {std::pair{pprof_out, &pprof}, {folded_out, &folded}}) {
    if (out.empty()) continue;
    FILE* file = fopen(out.c_str(), "wb");
    if (file == nullptr || fwrite(bytes->data(), 1, bytes->size(), file) != bytes->size()) {
      fprintf(stderr, "replay: cannot write %s\n", out.c_str());
      if (file != nullptr) fclose(file);
      return 1;
    }
    fclose(file);
  }
  return 0;
}

}  // namespace
}  // namespace pystrobe

int main(int argc, char** argv) {
  if (argc < 2) return pystrobe::Usage();
  std::vector<std::string> args(argv + 2, argv + argc);
  if (std::strcmp(argv[1], "capture") == 0) return pystrobe::Capture(args);
  if (std::strcmp(argv[1], "replay") == 0) return pystrobe::Replay(args);
  return pystrobe::Usage();
}

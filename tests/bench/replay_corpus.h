// A corpus of real ring buffer records and what naming them needed, so that
// the path from records to a written profile (Recorder, ProfileBuilder, a
// ProfileWriter) can be replayed without root, BPF or the processes sampled,
// the same way every time: the samples' records in the order they came, and
// for each process seen, snapshots of what the live path would have asked of
// it (its native symbols at the addresses sampled, its CPython interpreter
// and the bytes of the code objects sampled, read as CodeObjectReader reads
// them), and the kernel functions of the kernel frames.
//
// Written and read by the same build (record_replay_bench): the format
// carries the ABI version and refuses another.
#ifndef PYSTROBE_TESTS_BENCH_REPLAY_CORPUS_H_
#define PYSTROBE_TESTS_BENCH_REPLAY_CORPUS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/python/interpreter_finder.h"
#include "daemon/python/process_memory.h"
#include "daemon/recording/process_table.h"
#include "daemon/recording/python_process.h"
#include "daemon/symbolizer/native_symbolizer.h"

namespace pystrobe {

// A native frame as a live ProcessSymbols resolved it.
struct CorpusSymbol {
  std::string name;
  bool has_location = false;
  std::string path;
  std::string build_id;
  std::vector<CodeSegment> code_segments;
  uint64_t file_offset = 0;
};

// One process as it was when the capture ended.
struct CorpusProcess {
  uint32_t pid = 0;
  bool has_symbols = false;
  absl::flat_hash_map<uint64_t, CorpusSymbol> symbols;  // by lookup address
  bool has_python = false;
  PythonInterpreter interpreter;
  std::vector<std::pair<uint64_t, uint64_t>> interpreter_ranges;
  std::vector<std::pair<uint64_t, uint64_t>> eval_ranges;
  std::string cwd;
  // Every read of its memory that succeeded, by address: the bytes read.
  std::map<uint64_t, std::string> memory;
};

struct Corpus {
  // How it was recorded: what the replay's recorder and builder are told.
  int rate_hz = 0;
  bool offcpu = false;
  bool native = false;
  std::vector<std::vector<uint8_t>> records;
  std::vector<CorpusProcess> processes;
  // "start T name [module]" lines for the kernel functions of the kernel
  // frames seen: KernelSymbolizer::FromText names them as /proc/kallsyms did.
  std::string kallsyms;
};

absl::Status WriteCorpus(const Corpus& corpus, const std::string& path);
absl::StatusOr<Corpus> ReadCorpus(const std::string& path);

// Fills corpus.processes and corpus.kallsyms from the live processes and
// kernel, for what corpus.records need: call while the sampled processes
// still run. Processes gone by then are left out (as a process that exits
// before its first sample is handled is, live).
void SnapshotProcesses(Corpus& corpus);

// The live interfaces, served from a corpus. Each replay needs its own.
class CorpusSymbolizer : public NativeSymbolizer {
 public:
  explicit CorpusSymbolizer(const Corpus& corpus);
  absl::StatusOr<std::unique_ptr<ProcessSymbols>> ForProcess(uint32_t pid) override;

 private:
  absl::flat_hash_map<uint32_t, const CorpusProcess*> processes_;
};

class CorpusPythonDiscovery : public PythonDiscovery {
 public:
  explicit CorpusPythonDiscovery(const Corpus& corpus);
  absl::StatusOr<std::unique_ptr<PythonProcess>> Discover(uint32_t pid) override;

 private:
  absl::flat_hash_map<uint32_t, const CorpusProcess*> processes_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_TESTS_BENCH_REPLAY_CORPUS_H_

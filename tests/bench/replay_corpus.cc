#include "tests/bench/replay_corpus.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <type_traits>
#include <variant>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bpf/pystrobe_abi.h"
#include "daemon/recording/native_name_cache.h"
#include "daemon/records/record_decoder.h"
#include "daemon/symbolizer/kernel_symbolizer.h"
#include "daemon/symbolizer/shared_module_symbolizer.h"

namespace pystrobe {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'R', 'E', 'P', 'L', 'A', 'Y'};

static_assert(std::is_trivially_copyable_v<PythonLayout>);
static_assert(std::is_trivially_copyable_v<CodeSegment>);

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
  void U64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
  void Bytes(const void* data, size_t size) {
    U64(size);
    out_.append(static_cast<const char*>(data), size);
  }
  void Str(const std::string& s) { Bytes(s.data(), s.size()); }
  void Ranges(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
    U64(ranges.size());
    for (const auto& [start, end] : ranges) {
      U64(start);
      U64(end);
    }
  }
  const std::string& out() const { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  bool ok() const { return ok_; }
  uint8_t U8() {
    uint8_t v = 0;
    Raw(&v, sizeof(v));
    return v;
  }
  uint32_t U32() {
    uint32_t v = 0;
    Raw(&v, sizeof(v));
    return v;
  }
  uint64_t U64() {
    uint64_t v = 0;
    Raw(&v, sizeof(v));
    return v;
  }
  std::string Str() {
    uint64_t size = U64();
    if (!ok_ || size > in_.size() - at_) {
      ok_ = false;
      return "";
    }
    std::string s = in_.substr(at_, size);
    at_ += size;
    return s;
  }
  std::vector<std::pair<uint64_t, uint64_t>> Ranges() {
    std::vector<std::pair<uint64_t, uint64_t>> ranges(Count(16));
    for (auto& [start, end] : ranges) {
      start = U64();
      end = U64();
    }
    return ranges;
  }
  // A count of items at least `item_bytes` each: never more than what is left.
  size_t Count(size_t item_bytes) {
    uint64_t n = U64();
    if (!ok_ || n > (in_.size() - at_) / item_bytes) {
      ok_ = false;
      return 0;
    }
    return n;
  }
  void Raw(void* out, size_t size) {
    if (!ok_ || size > in_.size() - at_) {
      ok_ = false;
      return;
    }
    std::memcpy(out, in_.data() + at_, size);
    at_ += size;
  }

 private:
  const std::string& in_;
  size_t at_ = 0;
  bool ok_ = true;
};

void WriteInterpreter(Writer& w, const PythonInterpreter& p) {
  w.U32(static_cast<uint32_t>(p.pid));
  w.U32(static_cast<uint32_t>(p.version.major));
  w.U32(static_cast<uint32_t>(p.version.minor));
  w.U32(static_cast<uint32_t>(p.version.micro));
  w.Str(p.binary_path);
  w.U8(p.in_executable);
  w.U64(p.load_bias);
  w.U64(p.runtime_address);
  w.U64(p.code_type_address);
  w.U64(p.unicode_type_address);
  w.U64(p.bytes_type_address);
  w.U8(p.layout_from_debug_offsets);
  w.Bytes(&p.layout, sizeof(p.layout));
}

PythonInterpreter ReadInterpreter(Reader& r) {
  PythonInterpreter p;
  p.pid = static_cast<pid_t>(r.U32());
  p.version.major = static_cast<int>(r.U32());
  p.version.minor = static_cast<int>(r.U32());
  p.version.micro = static_cast<int>(r.U32());
  p.binary_path = r.Str();
  p.in_executable = r.U8() != 0;
  p.load_bias = r.U64();
  p.runtime_address = r.U64();
  p.code_type_address = r.U64();
  p.unicode_type_address = r.U64();
  p.bytes_type_address = r.U64();
  p.layout_from_debug_offsets = r.U8() != 0;
  std::string layout = r.Str();
  if (layout.size() == sizeof(p.layout)) std::memcpy(&p.layout, layout.data(), sizeof(p.layout));
  return p;
}

// A process's memory as it reads live, every successful read kept.
class RecordingMemory : public ProcessMemory {
 public:
  RecordingMemory(pid_t pid, std::map<uint64_t, std::string>* log) : live_(pid), log_(log) {}
  absl::Status Read(uint64_t address, void* out, size_t size) const override {
    absl::Status status = live_.Read(address, out, size);
    if (status.ok()) {
      std::string& kept = (*log_)[address];
      if (kept.size() < size) kept.assign(static_cast<const char*>(out), size);
    }
    return status;
  }

 private:
  RemoteProcessMemory live_;
  std::map<uint64_t, std::string>* log_;
};

// Serves the reads a RecordingMemory kept; anything else is unmapped.
class SnapshotMemory : public ProcessMemory {
 public:
  explicit SnapshotMemory(const std::map<uint64_t, std::string>* chunks) : chunks_(chunks) {}
  absl::Status Read(uint64_t address, void* out, size_t size) const override {
    // The chunk that starts at or below `address` and covers it; a few
    // candidates back at most (reads overlap little).
    auto it = chunks_->upper_bound(address);
    for (int tries = 0; tries < 16 && it != chunks_->begin(); ++tries) {
      --it;
      const uint64_t offset = address - it->first;
      if (offset <= it->second.size() && size <= it->second.size() - offset) {
        std::memcpy(out, it->second.data() + offset, size);
        return absl::OkStatus();
      }
    }
    return absl::OutOfRangeError(absl::StrFormat("0x%x: not in the snapshot", address));
  }

 private:
  const std::map<uint64_t, std::string>* chunks_;
};

class CorpusSymbols : public ProcessSymbols {
 public:
  explicit CorpusSymbols(const CorpusProcess* process) : process_(process) {}
  std::string Symbolize(uint64_t addr) override { return Resolve(addr).name; }
  NativeFrameSymbol Resolve(uint64_t addr) override {
    auto it = process_->symbols.find(addr);
    if (it == process_->symbols.end()) return {"[unknown]", std::nullopt};
    const CorpusSymbol& s = it->second;
    if (!s.has_location) return {s.name, std::nullopt};
    return {s.name, NativeCodeLocation{.path = s.path,
                                       .build_id = s.build_id,
                                       .code_segments = s.code_segments,
                                       .file_offset = s.file_offset}};
  }

 private:
  const CorpusProcess* process_;
};

}  // namespace

absl::Status WriteCorpus(const Corpus& corpus, const std::string& path) {
  Writer w;
  for (char c : kMagic) w.U8(static_cast<uint8_t>(c));
  w.U32(PYSTROBE_ABI_VERSION);
  w.U32(static_cast<uint32_t>(corpus.rate_hz));
  w.U8(corpus.offcpu);
  w.U8(corpus.native);
  w.U64(corpus.records.size());
  for (const std::vector<uint8_t>& record : corpus.records) w.Bytes(record.data(), record.size());
  w.U64(corpus.processes.size());
  for (const CorpusProcess& p : corpus.processes) {
    w.U32(p.pid);
    w.U8(p.has_symbols);
    w.U64(p.symbols.size());
    for (const auto& [addr, s] : p.symbols) {
      w.U64(addr);
      w.Str(s.name);
      w.U8(s.has_location);
      w.Str(s.path);
      w.Str(s.build_id);
      w.Bytes(s.code_segments.data(), s.code_segments.size() * sizeof(CodeSegment));
      w.U64(s.file_offset);
    }
    w.U8(p.has_python);
    if (p.has_python) {
      WriteInterpreter(w, p.interpreter);
      w.Ranges(p.interpreter_ranges);
      w.Ranges(p.eval_ranges);
      w.Str(p.cwd);
      w.U64(p.memory.size());
      for (const auto& [address, bytes] : p.memory) {
        w.U64(address);
        w.Str(bytes);
      }
    }
  }
  w.Str(corpus.kallsyms);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(w.out().data(), static_cast<std::streamsize>(w.out().size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

absl::StatusOr<Corpus> ReadCorpus(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Reader r(data);
  char magic[sizeof(kMagic)];
  r.Raw(magic, sizeof(magic));
  if (!r.ok() || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a replay corpus"));
  }
  if (uint32_t abi = r.U32(); abi != PYSTROBE_ABI_VERSION) {
    return absl::FailedPreconditionError(absl::StrCat(path, " holds ABI version ", abi,
                                                      " records; this build reads version ",
                                                      PYSTROBE_ABI_VERSION, ": capture it again"));
  }
  Corpus corpus;
  corpus.rate_hz = static_cast<int>(r.U32());
  corpus.offcpu = r.U8() != 0;
  corpus.native = r.U8() != 0;
  corpus.records.resize(r.Count(8));
  for (std::vector<uint8_t>& record : corpus.records) {
    std::string bytes = r.Str();
    record.assign(bytes.begin(), bytes.end());
  }
  corpus.processes.resize(r.Count(5));
  for (CorpusProcess& p : corpus.processes) {
    p.pid = r.U32();
    p.has_symbols = r.U8() != 0;
    size_t symbols = r.Count(8);
    for (size_t i = 0; i < symbols && r.ok(); ++i) {
      uint64_t addr = r.U64();
      CorpusSymbol& s = p.symbols[addr];
      s.name = r.Str();
      s.has_location = r.U8() != 0;
      s.path = r.Str();
      s.build_id = r.Str();
      std::string segments = r.Str();
      s.code_segments.resize(segments.size() / sizeof(CodeSegment));
      std::memcpy(s.code_segments.data(), segments.data(),
                  s.code_segments.size() * sizeof(CodeSegment));
      s.file_offset = r.U64();
    }
    p.has_python = r.U8() != 0;
    if (p.has_python) {
      p.interpreter = ReadInterpreter(r);
      p.interpreter_ranges = r.Ranges();
      p.eval_ranges = r.Ranges();
      p.cwd = r.Str();
      size_t chunks = r.Count(16);
      for (size_t i = 0; i < chunks && r.ok(); ++i) {
        uint64_t address = r.U64();
        p.memory[address] = r.Str();
      }
    }
  }
  corpus.kallsyms = r.Str();
  if (!r.ok()) return absl::DataLossError(absl::StrCat(path, " is cut short or corrupt"));
  return corpus;
}

void SnapshotProcesses(Corpus& corpus) {
  // What the records ask of each process, and of the kernel.
  struct Wanted {
    absl::btree_set<uint64_t> lookup_addresses;
    absl::btree_set<std::pair<uint64_t, uint32_t>> codes;  // (address, stamp)
  };
  std::map<uint32_t, Wanted> wanted;
  absl::btree_set<uint64_t> kernel_addresses;
  for (const std::vector<uint8_t>& bytes : corpus.records) {
    absl::StatusOr<RingRecord> record = DecodeRingRecord(bytes);
    if (!record.ok()) continue;
    const auto* sample = std::get_if<SampleRecord>(&*record);
    if (sample == nullptr) continue;
    Wanted& w = wanted[sample->pid];
    for (size_t i = 0; i < sample->user_ips.size(); ++i) {
      w.lookup_addresses.insert(FrameLookupAddress(sample->user_ips, i));
    }
    for (size_t i = 0; i < sample->kernel_ips.size(); ++i) {
      kernel_addresses.insert(FrameLookupAddress(sample->kernel_ips, i));
    }
    for (const PythonFrameRecord& frame : sample->python_frames) {
      w.codes.insert({frame.code, frame.stamp});
    }
  }

  SharedModuleSymbolizer symbolizer;
  corpus.processes.clear();
  for (const auto& [pid, w] : wanted) {
    CorpusProcess p;
    p.pid = pid;
    if (absl::StatusOr<std::unique_ptr<ProcessSymbols>> symbols = symbolizer.ForProcess(pid);
        symbols.ok()) {
      p.has_symbols = true;
      for (uint64_t address : w.lookup_addresses) {
        NativeFrameSymbol symbol = (*symbols)->Resolve(address);
        CorpusSymbol& s = p.symbols[address];
        s.name = std::move(symbol.name);
        if (symbol.location) {
          s.has_location = true;
          s.path = std::string(symbol.location->path);
          s.build_id = std::string(symbol.location->build_id);
          s.code_segments.assign(symbol.location->code_segments.begin(),
                                 symbol.location->code_segments.end());
          s.file_offset = symbol.location->file_offset;
        }
      }
    }
    if (absl::StatusOr<std::unique_ptr<PythonProcess>> live = PythonProcess::Discover(pid);
        live.ok()) {
      p.has_python = true;
      p.interpreter = (*live)->interpreter();
      p.interpreter_ranges = (*live)->interpreter_ranges();
      p.eval_ranges = (*live)->eval_ranges();
      p.cwd = (*live)->cwd();
      PythonProcess reader(p.interpreter,
                           std::make_unique<RecordingMemory>(static_cast<pid_t>(pid), &p.memory),
                           p.interpreter_ranges, p.cwd);
      for (const auto& [address, stamp] : w.codes) reader.ReadCode(address, stamp).IgnoreError();
    }
    if (p.has_symbols || p.has_python) corpus.processes.push_back(std::move(p));
  }

  corpus.kallsyms.clear();
  absl::StatusOr<KernelSymbolizer> kernel = KernelSymbolizer::FromFile();
  if (!kernel.ok()) return;
  absl::flat_hash_set<uint64_t> starts;
  for (uint64_t address : kernel_addresses) {
    std::optional<KernelSymbol> symbol = kernel->Lookup(address);
    if (!symbol || !starts.insert(address - symbol->offset).second) continue;
    absl::StrAppendFormat(&corpus.kallsyms, "%016x T %s", address - symbol->offset, symbol->name);
    if (!symbol->module.empty()) {
      absl::StrAppendFormat(&corpus.kallsyms, "\t[%s]", symbol->module);
    }
    corpus.kallsyms.push_back('\n');
  }
}

CorpusSymbolizer::CorpusSymbolizer(const Corpus& corpus) {
  for (const CorpusProcess& p : corpus.processes) {
    if (p.has_symbols) processes_[p.pid] = &p;
  }
}

absl::StatusOr<std::unique_ptr<ProcessSymbols>> CorpusSymbolizer::ForProcess(uint32_t pid) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return absl::NotFoundError(absl::StrCat("process ", pid, " exited"));
  return std::make_unique<CorpusSymbols>(it->second);
}

CorpusPythonDiscovery::CorpusPythonDiscovery(const Corpus& corpus) {
  for (const CorpusProcess& p : corpus.processes) {
    if (p.has_python) processes_[p.pid] = &p;
  }
}

absl::StatusOr<std::unique_ptr<PythonProcess>> CorpusPythonDiscovery::Discover(uint32_t pid) {
  auto it = processes_.find(pid);
  if (it == processes_.end()) return absl::NotFoundError(absl::StrCat("no CPython in ", pid));
  const CorpusProcess& p = *it->second;
  auto process = std::make_unique<PythonProcess>(
      p.interpreter, std::make_unique<SnapshotMemory>(&p.memory), p.interpreter_ranges, p.cwd);
  process->set_eval_ranges(p.eval_ranges);
  return process;
}

}  // namespace pystrobe

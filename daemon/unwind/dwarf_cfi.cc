#include "daemon/unwind/dwarf_cfi.h"

#include <cstring>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"

namespace pystrobe {
namespace {

// DWARF register numbers of x86-64 (System V psABI, figure 3.36).
constexpr uint64_t kRegRbp = 6;
constexpr uint64_t kRegRsp = 7;
constexpr uint64_t kRegRa = 16;

// A bounds-checked cursor over a byte range; a read past the end sets
// `failed` and yields zero, so parsers check once per record.
class Cursor {
 public:
  Cursor(const uint8_t* begin, const uint8_t* end) : pos_(begin), end_(end) {}

  bool failed() const { return failed_; }
  bool done() const { return pos_ >= end_; }
  const uint8_t* pos() const { return pos_; }
  size_t left() const { return end_ - pos_; }

  template <typename T>
  T Fixed() {
    T value{};
    if (left() < sizeof(T)) {
      failed_ = true;
      pos_ = end_;
      return value;
    }
    std::memcpy(&value, pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  uint64_t Uleb() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte = Fixed<uint8_t>();
      value |= uint64_t{byte & 0x7fu} << shift;
      if (!(byte & 0x80)) return value;
    }
    failed_ = true;
    return value;
  }
  int64_t Sleb() {
    int64_t value = 0;
    int shift = 0;
    uint8_t byte;
    do {
      byte = Fixed<uint8_t>();
      if (shift < 64) value |= int64_t{byte & 0x7f} << shift;
      shift += 7;
    } while ((byte & 0x80) && !failed_);
    if (shift < 64 && (byte & 0x40)) value |= -(int64_t{1} << shift);
    return value;
  }
  void Skip(uint64_t n) {
    if (n > left()) {
      failed_ = true;
      pos_ = end_;
      return;
    }
    pos_ += n;
  }
  const char* CString() {
    const char* s = reinterpret_cast<const char*>(pos_);
    const void* nul = std::memchr(pos_, 0, left());
    if (!nul) {
      failed_ = true;
      pos_ = end_;
      return "";
    }
    pos_ = static_cast<const uint8_t*>(nul) + 1;
    return s;
  }

 private:
  const uint8_t* pos_;
  const uint8_t* end_;
  bool failed_ = false;
};

// DW_EH_PE_* pointer encodings.
constexpr uint8_t kPeOmit = 0xff;

// Reads a pointer in `encoding`; `field_address` is the link-time address of
// the field itself (for pcrel). Indirect pointers cannot be followed here.
std::optional<uint64_t> ReadEncoded(Cursor& in, uint8_t encoding, uint64_t field_address) {
  if (encoding == kPeOmit) return 0;
  uint64_t value;
  switch (encoding & 0x0f) {
    case 0x00:
      value = in.Fixed<uint64_t>();
      break;
    case 0x01:
      value = in.Uleb();
      break;
    case 0x02:
      value = in.Fixed<uint16_t>();
      break;
    case 0x03:
      value = in.Fixed<uint32_t>();
      break;
    case 0x04:
      value = in.Fixed<uint64_t>();
      break;
    case 0x09:
      value = static_cast<uint64_t>(in.Sleb());
      break;
    case 0x0a:
      value = static_cast<uint64_t>(int64_t{in.Fixed<int16_t>()});
      break;
    case 0x0b:
      value = static_cast<uint64_t>(int64_t{in.Fixed<int32_t>()});
      break;
    case 0x0c:
      value = in.Fixed<uint64_t>();
      break;
    default:
      return std::nullopt;
  }
  switch (encoding & 0x70) {
    case 0x00:
      break;
    case 0x10:
      value += field_address;
      break;
    default:
      return std::nullopt;  // textrel, datarel, funcrel: not in x86-64 .eh_frame
  }
  if (encoding & 0x80) return std::nullopt;
  return value;
}

struct Cie {
  uint64_t code_align = 1;
  int64_t data_align = -8;
  uint64_t ra_register = kRegRa;
  uint8_t fde_encoding = 0;  // DW_EH_PE_absptr
  bool has_augmentation_data = false;
  bool signal_frame = false;
  const uint8_t* instructions = nullptr;
  const uint8_t* instructions_end = nullptr;
};

// How one register is recovered, of the three that matter.
struct RegisterRule {
  enum Kind : uint8_t { kSame, kUndefined, kOffset, kOther } kind = kSame;
  int64_t offset = 0;
  bool operator==(const RegisterRule&) const = default;
};

struct FrameState {
  enum CfaKind : uint8_t { kRegister, kPlt, kExpression } cfa_kind = kRegister;
  uint64_t cfa_register = kRegRsp;
  int64_t cfa_offset = 8;
  int64_t plt_threshold = 0;
  RegisterRule rbp;
  RegisterRule ra;
  bool operator==(const FrameState&) const = default;
};

// GCC's and binutils' PLT expression: rsp + 8 + ((rip & 15) >= N) << 3.
std::optional<int64_t> PltThreshold(absl::Span<const uint8_t> expr) {
  // DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and; DW_OP_litN;
  // DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
  static constexpr uint8_t kHead[] = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a};
  static constexpr uint8_t kTail[] = {0x2a, 0x33, 0x24, 0x22};
  if (expr.size() != sizeof(kHead) + 1 + sizeof(kTail)) return std::nullopt;
  if (std::memcmp(expr.data(), kHead, sizeof(kHead)) != 0) return std::nullopt;
  if (std::memcmp(expr.data() + sizeof(kHead) + 1, kTail, sizeof(kTail)) != 0) return std::nullopt;
  uint8_t lit = expr[sizeof(kHead)];
  if (lit < 0x30 || lit > 0x4f) return std::nullopt;
  return lit - 0x30;
}

pystrobe_unwind_row RowOf(uint64_t address, const FrameState& state, bool signal_frame) {
  pystrobe_unwind_row row{};
  row.addr = static_cast<uint32_t>(address);
  row.rbp_rule = PYSTROBE_UNWIND_RBP_SAME;
  if (state.rbp.kind == RegisterRule::kOffset) {
    if (state.rbp.offset >= INT16_MIN && state.rbp.offset <= INT16_MAX) {
      row.rbp_rule = PYSTROBE_UNWIND_RBP_OFFSET;
      row.rbp_offset = static_cast<int16_t>(state.rbp.offset);
    } else {
      row.rbp_rule = PYSTROBE_UNWIND_RBP_UNKNOWN;
    }
  } else if (state.rbp.kind == RegisterRule::kOther) {
    row.rbp_rule = PYSTROBE_UNWIND_RBP_UNKNOWN;
  }
  if (signal_frame) {
    row.cfa_rule = PYSTROBE_UNWIND_CFA_SIGNAL;
    row.rbp_rule = PYSTROBE_UNWIND_RBP_SAME;
    row.rbp_offset = 0;
    return row;
  }
  if (state.ra.kind == RegisterRule::kUndefined) {
    row.cfa_rule = PYSTROBE_UNWIND_CFA_END;
    row.rbp_rule = PYSTROBE_UNWIND_RBP_SAME;
    row.rbp_offset = 0;
    return row;
  }
  bool ra_at_cfa = state.ra.kind == RegisterRule::kOffset && state.ra.offset == -8;
  if (state.cfa_kind == FrameState::kPlt && ra_at_cfa) {
    row.cfa_rule = PYSTROBE_UNWIND_CFA_PLT;
    row.cfa_offset = static_cast<int32_t>(state.plt_threshold);
    return row;
  }
  if (state.cfa_kind == FrameState::kRegister && ra_at_cfa &&
      (state.cfa_register == kRegRsp || state.cfa_register == kRegRbp) &&
      state.cfa_offset >= INT32_MIN && state.cfa_offset <= INT32_MAX) {
    row.cfa_rule =
        state.cfa_register == kRegRsp ? PYSTROBE_UNWIND_CFA_RSP : PYSTROBE_UNWIND_CFA_RBP;
    row.cfa_offset = static_cast<int32_t>(state.cfa_offset);
    return row;
  }
  row.cfa_rule = PYSTROBE_UNWIND_CFA_INVALID;
  row.rbp_rule = PYSTROBE_UNWIND_RBP_SAME;
  row.rbp_offset = 0;
  return row;
}

bool SameRule(const pystrobe_unwind_row& a, const pystrobe_unwind_row& b) {
  return a.cfa_rule == b.cfa_rule && a.cfa_offset == b.cfa_offset && a.rbp_rule == b.rbp_rule &&
         a.rbp_offset == b.rbp_offset;
}

// Runs a CIE's or FDE's instructions from `state`. With `out`, rows are
// appended at each advance (the FDE's program); without, only the state
// changes (the CIE's initial instructions). False on an instruction this
// reader cannot skip.
class CfaProgram {
 public:
  CfaProgram(const Cie& cie, uint64_t start, uint64_t end)
      : cie_(cie), location_(start), end_(end) {}

  bool Run(const uint8_t* begin, const uint8_t* end, FrameState& state, FdeRows* out) {
    Cursor in(begin, end);
    while (!in.done() && !in.failed()) {
      uint8_t op = in.Fixed<uint8_t>();
      uint8_t high = op & 0xc0, low = op & 0x3f;
      if (high == 0x40) {  // DW_CFA_advance_loc
        Advance(low * cie_.code_align, state, out);
        continue;
      }
      if (high == 0x80) {  // DW_CFA_offset
        SetOffset(low, static_cast<int64_t>(in.Uleb()) * cie_.data_align, state);
        continue;
      }
      if (high == 0xc0) {  // DW_CFA_restore
        Restore(low, state);
        continue;
      }
      switch (op) {
        case 0x00:
          break;      // DW_CFA_nop
        case 0x01: {  // DW_CFA_set_loc
          uint64_t target = in.Fixed<uint64_t>();
          if (target > location_) Advance(target - location_, state, out);
          break;
        }
        case 0x02:
          Advance(in.Fixed<uint8_t>() * cie_.code_align, state, out);
          break;
        case 0x03:
          Advance(in.Fixed<uint16_t>() * cie_.code_align, state, out);
          break;
        case 0x04:
          Advance(in.Fixed<uint32_t>() * cie_.code_align, state, out);
          break;
        case 0x05: {  // DW_CFA_offset_extended
          uint64_t reg = in.Uleb();
          SetOffset(reg, static_cast<int64_t>(in.Uleb()) * cie_.data_align, state);
          break;
        }
        case 0x06:
          Restore(in.Uleb(), state);
          break;  // DW_CFA_restore_extended
        case 0x07:
          SetRule(in.Uleb(), {RegisterRule::kUndefined, 0}, state);
          break;
        case 0x08:
          SetRule(in.Uleb(), {RegisterRule::kSame, 0}, state);
          break;
        case 0x09: {  // DW_CFA_register
          uint64_t reg = in.Uleb();
          in.Uleb();
          SetRule(reg, {RegisterRule::kOther, 0}, state);
          break;
        }
        case 0x0a:
          stack_.push_back(state);
          break;    // DW_CFA_remember_state
        case 0x0b:  // DW_CFA_restore_state
          if (stack_.empty()) return false;
          state = stack_.back();
          stack_.pop_back();
          break;
        case 0x0c:  // DW_CFA_def_cfa
          state.cfa_kind = FrameState::kRegister;
          state.cfa_register = in.Uleb();
          state.cfa_offset = static_cast<int64_t>(in.Uleb());
          break;
        case 0x0d:  // DW_CFA_def_cfa_register
          state.cfa_kind = FrameState::kRegister;
          state.cfa_register = in.Uleb();
          break;
        case 0x0e:
          state.cfa_offset = static_cast<int64_t>(in.Uleb());
          break;
        case 0x0f: {  // DW_CFA_def_cfa_expression
          uint64_t size = in.Uleb();
          if (size > in.left()) return false;
          auto threshold = PltThreshold(absl::MakeConstSpan(in.pos(), size));
          state.cfa_kind = threshold ? FrameState::kPlt : FrameState::kExpression;
          state.plt_threshold = threshold.value_or(0);
          in.Skip(size);
          break;
        }
        case 0x10:    // DW_CFA_expression
        case 0x16: {  // DW_CFA_val_expression
          uint64_t reg = in.Uleb();
          in.Skip(in.Uleb());
          SetRule(reg, {RegisterRule::kOther, 0}, state);
          break;
        }
        case 0x11: {  // DW_CFA_offset_extended_sf
          uint64_t reg = in.Uleb();
          SetOffset(reg, in.Sleb() * cie_.data_align, state);
          break;
        }
        case 0x12:  // DW_CFA_def_cfa_sf
          state.cfa_kind = FrameState::kRegister;
          state.cfa_register = in.Uleb();
          state.cfa_offset = in.Sleb() * cie_.data_align;
          break;
        case 0x13:
          state.cfa_offset = in.Sleb() * cie_.data_align;
          break;
        case 0x14:    // DW_CFA_val_offset
        case 0x15: {  // DW_CFA_val_offset_sf
          uint64_t reg = in.Uleb();
          if (op == 0x14) {
            in.Uleb();
          } else {
            in.Sleb();
          }
          SetRule(reg, {RegisterRule::kOther, 0}, state);
          break;
        }
        case 0x2e:
          in.Uleb();
          break;      // DW_CFA_GNU_args_size
        case 0x2f: {  // DW_CFA_GNU_negative_offset_extended
          uint64_t reg = in.Uleb();
          SetOffset(reg, -static_cast<int64_t>(in.Uleb()) * cie_.data_align, state);
          break;
        }
        default:
          return false;
      }
    }
    return !in.failed();
  }

  // Closes the FDE: the last rule holds to its end.
  void Finish(const FrameState& state, FdeRows& out) {
    if (location_ < end_) Emit(state, out, end_);
  }

  void set_initial(const FrameState& initial) { initial_ = initial; }

 private:
  void Advance(uint64_t delta, const FrameState& state, FdeRows* out) {
    if (out && delta > 0) Emit(state, *out, location_ + delta);
    location_ += delta;
  }
  // Appends the rule that holds on [location_, to), merged with an equal
  // neighbour.
  void Emit(const FrameState& state, FdeRows& out, uint64_t to) {
    if (location_ >= end_ || to <= location_) return;
    pystrobe_unwind_row row = RowOf(location_, state, cie_.signal_frame);
    if (out.rows.empty() || !SameRule(out.rows.back(), row)) out.rows.push_back(row);
  }
  void SetOffset(uint64_t reg, int64_t offset, FrameState& state) {
    SetRule(reg, {RegisterRule::kOffset, offset}, state);
  }
  void SetRule(uint64_t reg, RegisterRule rule, FrameState& state) {
    if (reg == kRegRbp) state.rbp = rule;
    if (reg == cie_.ra_register) state.ra = rule;
  }
  void Restore(uint64_t reg, FrameState& state) {
    if (reg == kRegRbp) state.rbp = initial_.rbp;
    if (reg == cie_.ra_register) state.ra = initial_.ra;
  }

  const Cie& cie_;
  uint64_t location_;
  uint64_t end_;
  FrameState initial_;
  std::vector<FrameState> stack_;
};

// Parses the CIE whose record (after its length) spans [begin, end).
std::optional<Cie> ParseCie(Cursor in, const CfiSection& section, uint64_t record_address) {
  Cie cie;
  uint8_t version = in.Fixed<uint8_t>();
  const char* augmentation = in.CString();
  if (version != 1 && version != 3 && version != 4) return std::nullopt;
  if (augmentation[0] != '\0' && augmentation[0] != 'z') {
    // "eh" (an old GCC pointer) and vendor strings we do not know.
    return std::nullopt;
  }
  if (version == 4) {
    if (in.Fixed<uint8_t>() != 8) return std::nullopt;  // address size
    in.Fixed<uint8_t>();                                // segment selector size
  }
  cie.code_align = in.Uleb();
  cie.data_align = in.Sleb();
  cie.ra_register = version == 1 ? in.Fixed<uint8_t>() : in.Uleb();
  if (augmentation[0] == 'z') {
    cie.has_augmentation_data = true;
    uint64_t size = in.Uleb();
    Cursor data(in.pos(), in.pos() + std::min<uint64_t>(size, in.left()));
    in.Skip(size);
    for (const char* a = augmentation + 1; *a; ++a) {
      switch (*a) {
        case 'R':
          cie.fde_encoding = data.Fixed<uint8_t>();
          break;
        case 'L':
          data.Fixed<uint8_t>();
          break;
        case 'P': {
          uint8_t encoding = data.Fixed<uint8_t>();
          uint64_t field = section.address + (data.pos() - section.bytes.data());
          // An indirect personality pointer is still a pointer of known size.
          ReadEncoded(data, encoding & 0x7f, field);
          break;
        }
        case 'S':
          cie.signal_frame = true;
          break;
        case 'B':
          break;  // AArch64 BTI: nothing here
        default:
          return std::nullopt;
      }
    }
    if (data.failed()) return std::nullopt;
  }
  (void)record_address;
  if (in.failed()) return std::nullopt;
  cie.instructions = in.pos();
  cie.instructions_end = in.pos() + in.left();
  return cie;
}

}  // namespace

absl::Status ReadCfi(const CfiSection& section, const std::function<void(FdeRows&&)>& on_fde,
                     CfiStats* stats) {
  const uint8_t* base = section.bytes.data();
  const uint8_t* end = base + section.bytes.size();
  absl::flat_hash_map<uint64_t, std::optional<Cie>> cies;
  CfiStats local;
  Cursor records(base, end);
  bool any = false;

  auto cie_at = [&](uint64_t offset) -> const Cie* {
    auto it = cies.find(offset);
    if (it != cies.end()) return it->second ? &*it->second : nullptr;
    std::optional<Cie> cie;
    if (offset + 4 <= section.bytes.size()) {
      Cursor in(base + offset, end);
      uint64_t length = in.Fixed<uint32_t>();
      bool is64 = length == 0xffffffff;
      if (is64) length = in.Fixed<uint64_t>();
      if (!in.failed() && length <= in.left()) {
        Cursor body(in.pos(), in.pos() + length);
        uint64_t id = is64 ? body.Fixed<uint64_t>() : body.Fixed<uint32_t>();
        bool is_cie = section.is_eh_frame ? id == 0 : (is64 ? id == ~0ull : id == 0xffffffffu);
        if (is_cie) {
          cie = ParseCie(body, section, section.address + offset);
          ++local.cies;
        }
      }
    }
    auto [slot, inserted] = cies.emplace(offset, std::move(cie));
    return slot->second ? &*slot->second : nullptr;
  };

  while (!records.done()) {
    uint64_t length = records.Fixed<uint32_t>();
    if (records.failed()) break;
    if (length == 0) {
      // A terminator in .eh_frame; in a linked file more may follow.
      continue;
    }
    bool is64 = length == 0xffffffff;
    if (is64) length = records.Fixed<uint64_t>();
    if (records.failed() || length > records.left()) {
      if (!any) return absl::DataLossError("call frame information: broken record length");
      break;
    }
    const uint8_t* body_start = records.pos();
    Cursor body(body_start, body_start + length);
    records.Skip(length);
    any = true;

    const uint8_t* id_field = body.pos();
    uint64_t id = is64 ? body.Fixed<uint64_t>() : body.Fixed<uint32_t>();
    bool is_cie = section.is_eh_frame ? id == 0 : (is64 ? id == ~0ull : id == 0xffffffffu);
    if (is_cie) continue;  // read when an FDE names it

    ++local.fdes;
    uint64_t cie_offset = section.is_eh_frame ? (id_field - base) - id : id;
    const Cie* cie = cie_offset < section.bytes.size() ? cie_at(cie_offset) : nullptr;
    if (!cie) {
      ++local.fdes_skipped;
      continue;
    }
    uint64_t field = section.address + (body.pos() - base);
    uint8_t encoding = section.is_eh_frame ? cie->fde_encoding : 0x04;  // udata8
    auto start = ReadEncoded(body, encoding, field);
    auto range = ReadEncoded(body, encoding & 0x0f, 0);
    if (!start || !range || body.failed()) {
      ++local.fdes_skipped;
      continue;
    }
    if (cie->has_augmentation_data) body.Skip(body.Uleb());
    if (body.failed() || *range == 0) {
      ++local.fdes_skipped;
      continue;
    }
    if (*start + *range > (uint64_t{1} << 32)) {
      ++local.fdes_skipped;
      continue;
    }

    FdeRows fde;
    fde.start = *start;
    fde.end = *start + *range;
    FrameState state;
    // The CIE's initial instructions set the state every FDE starts from.
    FrameState initial;
    CfaProgram cie_program(*cie, fde.start, fde.end);
    if (!cie_program.Run(cie->instructions, cie->instructions_end, initial, nullptr)) {
      ++local.fdes_skipped;
      continue;
    }
    state = initial;
    CfaProgram program(*cie, fde.start, fde.end);
    program.set_initial(initial);
    if (!program.Run(body.pos(), body.pos() + body.left(), state, &fde)) {
      ++local.fdes_skipped;
      continue;
    }
    program.Finish(state, fde);
    on_fde(std::move(fde));
  }
  if (stats) *stats = local;
  return absl::OkStatus();
}

}  // namespace pystrobe

#include "daemon/python/code_object_reader.h"

#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pystrobe {
namespace {

void AppendUtf8(uint32_t code_point, std::string& out) {
  // Lone surrogates are legal in a Python str but not in UTF-8.
  if (code_point >= 0xd800 && code_point <= 0xdfff) code_point = 0xfffd;
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3f)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3f)));
  }
}

template <typename T>
T Load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// 2.7's names: a PyStringObject, whose bytes are the name (ASCII for
// identifiers, the file system's encoding for file names).
absl::StatusOr<std::string> ReadPythonByteString(const ProcessMemory& memory,
                                                 const PythonInterpreter& interpreter,
                                                 uint64_t address, std::string_view what,
                                                 size_t max_chars) {
  const pystrobe_python_offsets& o = interpreter.layout.abi;
  uint8_t header[32];
  if (o.var_object_size + 8 > sizeof(header)) return absl::InternalError("bytes layout too large");
  if (absl::Status status = memory.Read(address, header, o.var_object_size + 8); !status.ok()) {
    return status;
  }
  if (Load<uint64_t>(header + o.object_type) != interpreter.bytes_type_address) {
    return absl::DataLossError(absl::StrFormat("%s at 0x%x is not a str", what, address));
  }
  const int64_t length = Load<int64_t>(header + o.var_object_size);
  if (length < 0 || static_cast<uint64_t>(length) > max_chars) {
    return absl::DataLossError(
        absl::StrFormat("%s at 0x%x has implausible length %d", what, address, length));
  }
  std::string out(static_cast<size_t>(length), '\0');
  if (absl::Status status = memory.Read(address + o.bytes_data, out.data(), out.size());
      !status.ok()) {
    return status;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ReadPythonStr(const ProcessMemory& memory,
                                          const PythonInterpreter& interpreter, uint64_t address,
                                          std::string_view what, size_t max_chars) {
  const PythonLayout& layout = interpreter.layout;
  if (address == 0) return absl::DataLossError(absl::StrCat(std::string(what), " is NULL"));
  if (layout.abi.names_are_bytes) {
    return ReadPythonByteString(memory, interpreter, address, what, max_chars);
  }
  uint8_t header[128];
  const size_t header_size = layout.abi.unicode_state + 4;
  if (header_size > sizeof(header)) return absl::InternalError("unicode layout too large");
  if (absl::Status status = memory.Read(address, header, header_size); !status.ok()) {
    return status;
  }
  if (Load<uint64_t>(header + layout.abi.object_type) != interpreter.unicode_type_address) {
    return absl::DataLossError(absl::StrFormat("%s at 0x%x is not a str", what, address));
  }
  const int64_t length = Load<int64_t>(header + layout.abi.unicode_length);
  const uint32_t state = Load<uint32_t>(header + layout.abi.unicode_state);
  const uint32_t kind = (state >> layout.abi.unicode_kind_shift) & 7;
  const bool compact = (state >> layout.abi.unicode_compact_shift) & 1;
  const bool ascii = (state >> layout.abi.unicode_ascii_shift) & 1;
  if (length < 0 || static_cast<uint64_t>(length) > max_chars) {
    return absl::DataLossError(
        absl::StrFormat("%s at 0x%x has implausible length %d", what, address, length));
  }
  if (!compact || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1)) {
    return absl::DataLossError(
        absl::StrFormat("%s at 0x%x has an unexpected str state 0x%x", what, address, state));
  }
  const uint64_t data =
      address + (ascii ? layout.abi.unicode_ascii_data : layout.abi.unicode_compact_data);
  std::vector<uint8_t> raw(static_cast<size_t>(length) * kind);
  if (absl::Status status = memory.Read(data, raw.data(), raw.size()); !status.ok()) {
    return status;
  }
  std::string out;
  out.reserve(raw.size());
  for (int64_t i = 0; i < length; ++i) {
    uint32_t code_point = 0;
    switch (kind) {
      case 1:
        code_point = raw[i];
        break;
      case 2:
        code_point = Load<uint16_t>(&raw[i * 2]);
        break;
      default:
        code_point = Load<uint32_t>(&raw[i * 4]);
        break;
    }
    if ((ascii && code_point >= 0x80) || code_point > 0x10ffff) {
      return absl::DataLossError(
          absl::StrFormat("%s at 0x%x holds an invalid character 0x%x", what, address, code_point));
    }
    AppendUtf8(code_point, out);
  }
  return out;
}

absl::StatusOr<std::string> CodeObjectReader::ReadString(uint64_t address,
                                                         std::string_view what) const {
  return ReadPythonStr(memory_, interpreter_, address, what, kMaxNameBytes);
}

absl::StatusOr<uint64_t> FrameBytecodeStart(const ProcessMemory& memory,
                                            const pystrobe_python_offsets& o, uint64_t code,
                                            int32_t tlbc_index) {
  if (tlbc_index <= 0 || o.code_tlbc == PYSTROBE_PY_OFFSET_NONE) return code + o.code_code_adaptive;
  // co_tlbc is a _PyCodeArray: {size, entries[]}.
  absl::StatusOr<uint64_t> copies = memory.ReadValue<uint64_t>(code + o.code_tlbc);
  if (!copies.ok()) return copies.status();
  absl::StatusOr<int64_t> size = memory.ReadValue<int64_t>(*copies);
  if (!size.ok()) return size.status();
  if (tlbc_index >= *size) {
    return absl::DataLossError(absl::StrFormat(
        "bytecode copy %d of code 0x%x is past its %d copies", tlbc_index, code, *size));
  }
  return memory.ReadValue<uint64_t>(*copies + 8 + 8 * static_cast<uint64_t>(tlbc_index));
}

absl::StatusOr<std::vector<uint8_t>> CodeObjectReader::ReadBytes(uint64_t address, size_t max_size,
                                                                 std::string_view what) const {
  const pystrobe_python_offsets& o = interpreter_.layout.abi;
  if (address == 0) return absl::DataLossError(absl::StrCat(std::string(what), " is NULL"));
  // A free-threaded build's header is 16 bytes longer: ob_size at 32.
  uint8_t header[64];
  if (o.var_object_size + 8 > sizeof(header)) return absl::InternalError("bytes layout too large");
  if (absl::Status status = memory_.Read(address, header, o.var_object_size + 8); !status.ok()) {
    return status;
  }
  if (Load<uint64_t>(header + o.object_type) != interpreter_.bytes_type_address) {
    return absl::DataLossError(absl::StrFormat("%s at 0x%x is not bytes", what, address));
  }
  const int64_t size = Load<int64_t>(header + o.var_object_size);
  if (size < 0 || static_cast<uint64_t>(size) > max_size) {
    return absl::DataLossError(
        absl::StrFormat("%s at 0x%x has implausible size %d", what, address, size));
  }
  std::vector<uint8_t> data(static_cast<size_t>(size));
  if (absl::Status status = memory_.Read(address + o.bytes_data, data.data(), data.size());
      !status.ok()) {
    return status;
  }
  return data;
}

absl::Status CodeObjectReader::ReadHeader(uint64_t address,
                                          uint8_t (&header)[kMaxCodeHeader]) const {
  const pystrobe_python_offsets& o = interpreter_.layout.abi;
  if (address == 0) return absl::DataLossError("code object address is NULL");
  const uint32_t header_size = pystrobe_python_code_head_size(&o);
  if (header_size > sizeof(header)) return absl::InternalError("code object layout too large");
  if (absl::Status status = memory_.Read(address, header, header_size); !status.ok()) {
    return status;
  }
  if (Load<uint64_t>(header + o.object_type) != interpreter_.code_type_address) {
    return absl::DataLossError(absl::StrFormat("0x%x is not a code object", address));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const PythonCodeObject>> CodeObjectReader::ReadFromMemory(
    uint64_t address) const {
  const pystrobe_python_offsets& o = interpreter_.layout.abi;
  uint8_t header[kMaxCodeHeader];
  if (absl::Status status = ReadHeader(address, header); !status.ok()) return status;
  auto code = std::make_shared<PythonCodeObject>();
  code->address = address;
  const uint64_t filename = Load<uint64_t>(header + o.code_filename);
  const uint64_t name = Load<uint64_t>(header + o.code_name);
  code->first_line = Load<int32_t>(header + o.code_firstlineno);
  code->stamp = pystrobe_python_code_stamp32(
      pystrobe_python_code_stamp(filename, name, static_cast<uint32_t>(code->first_line)));
  if (code->first_line < 0) {
    return absl::DataLossError(
        absl::StrFormat("code object 0x%x has a negative first line", address));
  }
  const uint64_t display_name =
      o.code_qualname != PYSTROBE_PY_OFFSET_NONE ? Load<uint64_t>(header + o.code_qualname) : name;
  absl::StatusOr<std::string> name_text = ReadString(display_name, "co_qualname/co_name");
  if (!name_text.ok()) return name_text.status();
  code->name = std::move(*name_text);
  absl::StatusOr<std::string> filename_text = ReadString(filename, "co_filename");
  if (!filename_text.ok()) return filename_text.status();
  code->filename = std::move(*filename_text);
  absl::StatusOr<std::vector<uint8_t>> table =
      ReadBytes(Load<uint64_t>(header + o.code_linetable), kMaxLineTableBytes, "line table");
  if (table.ok()) {
    code->line_table_bytes = std::move(*table);
  } else if (line_tables_ == LineTables::kRequired || !absl::IsOutOfRange(table.status())) {
    return table.status();
  }
  code->line_table = LineTable::Decode(LineTableFormatFor(interpreter_.version),
                                       code->line_table_bytes, code->first_line);
  // The bytecode's length bounds the offsets the walker may send.
  int64_t code_bytes = 0;
  if (o.code_code != PYSTROBE_PY_OFFSET_NONE) {
    const uint64_t bytecode = Load<uint64_t>(header + o.code_code);
    absl::StatusOr<int64_t> size = memory_.ReadValue<int64_t>(bytecode + o.var_object_size);
    if (!size.ok()) return size.status();
    code_bytes = *size;
  } else {
    code_bytes = 2 * Load<int64_t>(header + o.var_object_size);  // Py_SIZE: code units
  }
  if (code_bytes < 0 || code_bytes > static_cast<int64_t>(kMaxLineTableBytes) * 64) {
    return absl::DataLossError(
        absl::StrFormat("code object 0x%x has implausible bytecode size %d", address, code_bytes));
  }
  code->code_bytes = static_cast<uint32_t>(code_bytes);
  return code;
}

absl::StatusOr<uint32_t> CodeObjectReader::CurrentStamp(uint64_t address) const {
  const pystrobe_python_offsets& o = interpreter_.layout.abi;
  uint8_t header[kMaxCodeHeader];
  if (absl::Status status = ReadHeader(address, header); !status.ok()) return status;
  return pystrobe_python_code_stamp32(pystrobe_python_code_stamp(
      Load<uint64_t>(header + o.code_filename), Load<uint64_t>(header + o.code_name),
      static_cast<uint32_t>(Load<int32_t>(header + o.code_firstlineno))));
}

absl::StatusOr<std::shared_ptr<const PythonCodeObject>> CodeObjectReader::ReadCurrent(
    uint64_t address) {
  absl::StatusOr<std::shared_ptr<const PythonCodeObject>> code = ReadFromMemory(address);
  if (!code.ok()) {
    cache_.erase(address);
    return code.status();
  }
  if (cache_.size() >= kMaxCachedObjects) cache_.clear();
  cache_[address] = *code;
  return code;
}

absl::StatusOr<std::shared_ptr<const PythonCodeObject>> CodeObjectReader::Read(uint64_t address,
                                                                               uint32_t stamp) {
  if (auto it = cache_.find(address); it != cache_.end() && it->second->stamp == stamp) {
    return it->second;
  }
  absl::StatusOr<std::shared_ptr<const PythonCodeObject>> code = ReadCurrent(address);
  if (!code.ok()) return code.status();
  if ((*code)->stamp != stamp) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "code object at 0x%x was replaced since it was sampled (stamp mismatch)", address));
  }
  return code;
}

absl::StatusOr<PythonFrameSymbol> CodeObjectReader::Symbolize(uint64_t address, uint32_t stamp,
                                                              int32_t instr_offset) {
  absl::StatusOr<std::shared_ptr<const PythonCodeObject>> code = Read(address, stamp);
  if (!code.ok()) return code.status();
  if (instr_offset >= 0 && static_cast<uint32_t>(instr_offset) >= (*code)->code_bytes) {
    return absl::OutOfRangeError(
        absl::StrFormat("instruction offset %d beyond the %u bytes of code object 0x%x (%s)",
                        instr_offset, (*code)->code_bytes, address, (*code)->name));
  }
  return PythonFrameSymbol{(*code)->name, (*code)->filename,
                           (*code)->line_table.LineForOffset(instr_offset)};
}

}  // namespace pystrobe

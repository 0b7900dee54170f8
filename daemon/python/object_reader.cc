#include "daemon/python/object_reader.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/python/code_object_reader.h"

namespace pystrobe {
namespace {

// Type flags (Include/object.h): the instance dict lives before the object
// (3.11+), its values inline after it (3.13+).
constexpr uint64_t kTpFlagsInlineValues = 1u << 2;
constexpr uint64_t kTpFlagsManagedDict = 1u << 4;
constexpr uint64_t kTpFlagsHeapType = 1u << 9;
// dk_kind of a split table's keys (3.11+).
constexpr uint8_t kDictKeysSplit = 2;
constexpr uint8_t kDictKeysUnicode = 1;

// The most of an object's head that is read at once (a free-threaded set's
// table pointer ends at 64).
constexpr size_t kMaxHeader = 96;

template <typename T>
T Load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

}  // namespace

absl::StatusOr<uint64_t> PythonObjectReader::Pointer(uint64_t address) const {
  if (address == 0) return absl::DataLossError("read through a NULL pointer");
  return memory_.ReadValue<uint64_t>(address);
}

absl::StatusOr<uint64_t> PythonObjectReader::TypeOf(uint64_t object) const {
  absl::StatusOr<uint64_t> type = Pointer(object + interpreter_.layout.abi.object_type);
  if (type.ok() && *type == 0) return absl::DataLossError("object without a type");
  return type;
}

absl::StatusOr<std::string> PythonObjectReader::TypeName(uint64_t type) {
  if (auto it = type_names_.find(type); it != type_names_.end()) return it->second;
  absl::StatusOr<uint64_t> name = Pointer(type + layout_.type_name);
  if (!name.ok()) return name.status();
  // tp_name is a C string; read it in pieces so a name near the end of a
  // mapping still reads.
  std::string text;
  for (uint64_t at = *name; text.size() < 256; at += 16) {
    char chunk[16];
    if (absl::Status status = memory_.Read(at, chunk, sizeof(chunk)); !status.ok()) return status;
    const size_t length = strnlen(chunk, sizeof(chunk));
    text.append(chunk, length);
    if (length < sizeof(chunk)) break;
  }
  if (type_names_.size() > 4096) type_names_.clear();
  type_names_[type] = text;
  return text;
}

absl::StatusOr<std::string> PythonObjectReader::TypeNameOf(uint64_t object) {
  absl::StatusOr<uint64_t> type = TypeOf(object);
  if (!type.ok()) return type.status();
  return TypeName(*type);
}

absl::StatusOr<bool> PythonObjectReader::IsInstance(uint64_t object,
                                                    std::initializer_list<std::string_view> names) {
  absl::StatusOr<uint64_t> type = TypeOf(object);
  if (!type.ok()) return type.status();
  for (int depth = 0; *type != 0 && depth < kMaxBaseDepth; ++depth) {
    absl::StatusOr<std::string> name = TypeName(*type);
    if (!name.ok()) return name.status();
    for (std::string_view candidate : names) {
      if (*name == candidate) return true;
    }
    type = Pointer(*type + layout_.type_base);
    if (!type.ok()) return type.status();
  }
  return false;
}

absl::Status PythonObjectReader::ExpectType(uint64_t object,
                                            std::initializer_list<std::string_view> names,
                                            std::string_view what) {
  if (object == 0) return absl::DataLossError(absl::StrCat(std::string(what), " is NULL"));
  absl::StatusOr<std::string> name = TypeNameOf(object);
  if (!name.ok()) return name.status();
  for (std::string_view candidate : names) {
    if (*name == candidate) return absl::OkStatus();
  }
  return absl::DataLossError(
      absl::StrFormat("%s at 0x%x is a %s, not a %s", what, object, *name, *names.begin()));
}

absl::StatusOr<std::string> PythonObjectReader::Str(uint64_t object) const {
  return ReadPythonStr(memory_, interpreter_, object, "str", kMaxStrChars);
}

absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> PythonObjectReader::KeysItems(
    uint64_t keys, uint64_t values) {
  const PythonObjectLayout& l = layout_;
  uint8_t header[kMaxHeader];
  if (l.dictkeys_indices > sizeof(header)) return absl::InternalError("dict keys layout too large");
  if (absl::Status status = memory_.Read(keys, header, l.dictkeys_indices); !status.ok()) {
    return status;
  }
  uint64_t slots = 0;
  uint64_t index_bytes = 0;
  uint32_t entry_size = l.dictkeyentry_size;
  uint32_t key_in_entry = 8;  // {hash, key, value}
  if (l.dictkeys_size != kNoObjectField) {
    slots = Load<uint64_t>(header + l.dictkeys_size);
    const uint64_t width = slots <= 0xff ? 1 : slots <= 0xffff ? 2 : slots <= 0xffffffff ? 4 : 8;
    index_bytes = slots * width;
  } else {
    const uint8_t log2_size = header[l.dictkeys_log2_size];
    const uint8_t log2_index_bytes = header[l.dictkeys_log2_index_bytes];
    if (log2_size > 40 || log2_index_bytes > 43) {
      return absl::DataLossError(absl::StrFormat("dict keys 0x%x has implausible sizes", keys));
    }
    slots = uint64_t{1} << log2_size;
    index_bytes = uint64_t{1} << log2_index_bytes;
    const uint8_t kind = header[l.dictkeys_kind];
    if (kind == kDictKeysUnicode || kind == kDictKeysSplit) {
      entry_size = l.dictunicodeentry_size;  // {key, value}
      key_in_entry = 0;
    }
  }
  const int64_t entries = Load<int64_t>(header + l.dictkeys_nentries);
  if (slots == 0 || slots > kMaxTableSlots || entries < 0 ||
      static_cast<uint64_t>(entries) > slots || index_bytes > slots * 8) {
    return absl::DataLossError(absl::StrFormat(
        "dict keys 0x%x has implausible sizes (%d slots, %d entries)", keys, slots, entries));
  }
  std::vector<uint8_t> table(static_cast<size_t>(entries) * entry_size);
  const uint64_t first_entry = keys + l.dictkeys_indices + index_bytes;
  if (absl::Status status = memory_.Read(first_entry, table.data(), table.size()); !status.ok()) {
    return status;
  }
  std::vector<uint64_t> split_values;
  if (values != 0 && entries > 0) {
    split_values.resize(static_cast<size_t>(entries));
    if (absl::Status status = memory_.Read(values + l.dictvalues_values, split_values.data(),
                                           split_values.size() * 8);
        !status.ok()) {
      return status;
    }
  }
  std::vector<std::pair<uint64_t, uint64_t>> items;
  for (int64_t i = 0; i < entries; ++i) {
    const uint8_t* entry = table.data() + i * entry_size;
    const uint64_t key = Load<uint64_t>(entry + key_in_entry);
    const uint64_t value = values != 0 ? split_values[i] : Load<uint64_t>(entry + key_in_entry + 8);
    if (key != 0 && value != 0) items.emplace_back(key, value);
  }
  return items;
}

absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> PythonObjectReader::DictItems(
    uint64_t dict) {
  if (absl::Status status = ExpectType(dict, {"dict"}, "dict"); !status.ok()) return status;
  uint8_t header[kMaxHeader];
  if (layout_.dict_values + 8 > sizeof(header)) return absl::InternalError("dict layout too large");
  if (absl::Status status = memory_.Read(dict, header, layout_.dict_values + 8); !status.ok()) {
    return status;
  }
  const uint64_t keys = Load<uint64_t>(header + layout_.dict_keys);
  const uint64_t values = Load<uint64_t>(header + layout_.dict_values);
  if (keys == 0) return absl::DataLossError(absl::StrFormat("dict 0x%x has no keys", dict));
  return KeysItems(keys, values);
}

absl::StatusOr<uint64_t> PythonObjectReader::DictGetStr(uint64_t dict, std::string_view key) {
  absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> items = DictItems(dict);
  if (!items.ok()) return items.status();
  for (const auto& [k, v] : *items) {
    // Keys that are not str (or not readable) cannot be the one we want.
    absl::StatusOr<std::string> text = Str(k);
    if (text.ok() && *text == key) return v;
  }
  return 0;
}

absl::StatusOr<std::vector<uint64_t>> PythonObjectReader::SetItems(uint64_t set) {
  if (absl::Status status = ExpectType(set, {"set"}, "set"); !status.ok()) return status;
  if (layout_.set_table + 8 > kMaxHeader) return absl::InternalError("set layout too large");
  // The target runs on: a set that grows or shrinks while its table is read
  // moves to a new table, which it fills entry by entry after its head already
  // points there, and frees the old one (a task that was there all along goes
  // missing). Adds and discards in place do not matter: a slot once taken
  // stays taken (a discarded key leaves the dummy), so a table read whole
  // holds at least the head's fill (live and deleted keys) from before it was
  // read. The table is kept when it is the one the head named before and
  // after, and holds that many.
  constexpr int kAttempts = 8;
  absl::Status last_read;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    absl::StatusOr<SetTable> before = ReadSetHead(set);
    if (!before.ok()) return before.status();
    std::vector<uint64_t> slots(static_cast<size_t>(before->mask + 1) * 2);
    last_read = memory_.Read(before->table, slots.data(), slots.size() * 8);
    absl::StatusOr<SetTable> after = ReadSetHead(set);
    if (!after.ok()) return after.status();
    // A table freed (or a head caught between its mask and its table) may
    // not be readable at all: that too is a set that changed. So is one that
    // could not be read under a head that names it before and after: two
    // resizes may have moved the set away and back to a table at the same
    // address (an allocator hands freed blocks out again), unmapping the
    // first meanwhile.
    if (after->table != before->table || after->mask != before->mask || !last_read.ok()) {
      continue;
    }
    // setentry is {key, hash}; free slots are NULL, deleted ones the dummy key
    // (which callers reject by type, as anything else they do not expect).
    std::vector<uint64_t> keys;
    for (size_t i = 0; i < slots.size(); i += 2) {
      if (slots[i] != 0) keys.push_back(slots[i]);
    }
    if (static_cast<int64_t>(keys.size()) < before->fill) continue;
    return keys;
  }
  if (!last_read.ok()) {
    return absl::UnavailableError(
        absl::StrFormat("set 0x%x: its table could not be read in %d tries: %s", set, kAttempts,
                        last_read.message()));
  }
  return absl::UnavailableError(
      absl::StrFormat("set 0x%x changed under %d reads of its table", set, kAttempts));
}

absl::StatusOr<PythonObjectReader::SetTable> PythonObjectReader::ReadSetHead(uint64_t set) {
  uint8_t header[kMaxHeader];
  if (absl::Status status = memory_.Read(set, header, layout_.set_table + 8); !status.ok()) {
    return status;
  }
  const int64_t mask = Load<int64_t>(header + layout_.set_mask);
  const uint64_t table = Load<uint64_t>(header + layout_.set_table);
  if (mask < 0 || static_cast<uint64_t>(mask) >= kMaxTableSlots || ((mask + 1) & mask) != 0) {
    return absl::DataLossError(absl::StrFormat("set 0x%x has implausible mask %d", set, mask));
  }
  // fill (slots that are not free) sits just before used in every version.
  return SetTable{
      .fill = Load<int64_t>(header + layout_.set_used - 8), .mask = mask, .table = table};
}

absl::StatusOr<std::vector<uint64_t>> PythonObjectReader::Sequence(uint64_t object,
                                                                   uint32_t items_offset,
                                                                   std::string_view type_name) {
  if (absl::Status status = ExpectType(object, {type_name}, type_name); !status.ok()) {
    return status;
  }
  absl::StatusOr<int64_t> size =
      memory_.ReadValue<int64_t>(object + interpreter_.layout.abi.var_object_size);
  if (!size.ok()) return size.status();
  if (*size < 0 || static_cast<uint64_t>(*size) > kMaxSequenceItems) {
    return absl::DataLossError(
        absl::StrFormat("%s 0x%x has implausible size %d", type_name, object, *size));
  }
  uint64_t items = object + items_offset;
  if (type_name == "list") {  // ob_item points to the array
    absl::StatusOr<uint64_t> array = Pointer(items);
    if (!array.ok()) return array.status();
    items = *array;
  }
  std::vector<uint64_t> out(static_cast<size_t>(*size));
  if (out.empty()) return out;
  if (absl::Status status = memory_.Read(items, out.data(), out.size() * 8); !status.ok()) {
    return status;
  }
  return out;
}

absl::StatusOr<std::vector<uint64_t>> PythonObjectReader::ListItems(uint64_t list) {
  return Sequence(list, layout_.list_items, "list");
}

absl::StatusOr<std::vector<uint64_t>> PythonObjectReader::TupleItems(uint64_t tuple) {
  return Sequence(tuple, layout_.tuple_items, "tuple");
}

absl::StatusOr<uint64_t> PythonObjectReader::WeakrefTarget(uint64_t weakref) {
  // tp_name is "weakref" up to 3.11, "weakref.ReferenceType" from 3.12.
  if (absl::Status status =
          ExpectType(weakref, {"weakref", "weakref.ReferenceType", "weakref.ref"}, "weakref");
      !status.ok()) {
    return status;
  }
  absl::StatusOr<uint64_t> target = Pointer(weakref + layout_.weakref_object);
  if (!target.ok()) return target.status();
  // A dead reference points to None (3.8-3.12) or is cleared.
  if (*target == 0) return 0;
  absl::StatusOr<std::string> type = TypeNameOf(*target);
  if (!type.ok()) return type.status();
  return *type == "NoneType" ? 0 : *target;
}

absl::StatusOr<uint64_t> PythonObjectReader::Attribute(uint64_t object, std::string_view name) {
  absl::StatusOr<uint64_t> type = TypeOf(object);
  if (!type.ok()) return type.status();
  absl::StatusOr<uint64_t> flags = Pointer(*type + layout_.type_flags);
  if (!flags.ok()) return flags.status();
  uint64_t dict = 0;
  uint64_t values = 0;  // the values of a split dict whose keys the type caches
  if (layout_.minor >= 11 && (*flags & kTpFlagsManagedDict)) {
    absl::StatusOr<uint64_t> managed = Pointer(object + layout_.managed_dict);
    if (!managed.ok()) return managed.status();
    if (layout_.minor == 12 && (*managed & 1)) {
      values = *managed + 1;  // _PyDictOrValues: the values pointer minus 1
    } else if (*managed != 0) {
      dict = *managed;
    } else if (layout_.minor == 11) {
      absl::StatusOr<uint64_t> v = Pointer(object - 32);
      if (!v.ok()) return v.status();
      values = *v;
    } else if (layout_.minor >= 13 && (*flags & kTpFlagsInlineValues)) {
      absl::StatusOr<int64_t> basic_size =
          memory_.ReadValue<int64_t>(*type + layout_.type_basicsize);
      if (!basic_size.ok()) return basic_size.status();
      if (*basic_size <= 0 || *basic_size > 4096) {
        return absl::DataLossError("type with an implausible tp_basicsize");
      }
      values = object + static_cast<uint64_t>(*basic_size);
      // PyDictValues {capacity, size, embedded, valid}: invalid once a dict owns them.
      absl::StatusOr<uint8_t> valid = memory_.ReadValue<uint8_t>(values + 3);
      if (!valid.ok()) return valid.status();
      if (*valid == 0) return 0;
    }
  } else {
    absl::StatusOr<int64_t> offset = memory_.ReadValue<int64_t>(*type + layout_.type_dictoffset);
    if (!offset.ok()) return offset.status();
    if (*offset <= 0 || *offset > 4096) return 0;  // no __dict__ (negative: var-sized, rare)
    absl::StatusOr<uint64_t> d = Pointer(object + static_cast<uint64_t>(*offset));
    if (!d.ok()) return d.status();
    dict = *d;
  }
  if (dict != 0) return DictGetStr(dict, name);
  if (values == 0) return 0;
  if (!(*flags & kTpFlagsHeapType) || layout_.heaptype_cached_keys == kNoObjectField) return 0;
  absl::StatusOr<uint64_t> keys = Pointer(*type + layout_.heaptype_cached_keys);
  if (!keys.ok()) return keys.status();
  if (*keys == 0) return 0;
  absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> items = KeysItems(*keys, values);
  if (!items.ok()) return items.status();
  for (const auto& [k, v] : *items) {
    absl::StatusOr<std::string> text = Str(k);
    if (text.ok() && *text == name) return v;
  }
  return 0;
}

}  // namespace pystrobe

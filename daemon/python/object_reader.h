// Reads ordinary Python objects (str, dict, set, list, tuple, weakref,
// instance attributes) out of a running process. Every read is bounded and
// checked: a changing or hostile object is an error, never a wild read loop.
#ifndef PYSTROBE_DAEMON_PYTHON_OBJECT_READER_H_
#define PYSTROBE_DAEMON_PYTHON_OBJECT_READER_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "daemon/python/interpreter_finder.h"
#include "daemon/python/object_layout.h"
#include "daemon/python/process_memory.h"

namespace pystrobe {

class PythonObjectReader {
 public:
  // Dicts and sets with more slots than this are refused (a 2^17-slot table
  // is read in one 2-3 MiB read).
  static constexpr uint64_t kMaxTableSlots = 1u << 17;
  static constexpr uint64_t kMaxSequenceItems = 1u << 16;
  static constexpr size_t kMaxStrChars = 4096;
  static constexpr int kMaxBaseDepth = 16;

  // `memory`, `interpreter` and `layout` must outlive the reader.
  PythonObjectReader(const ProcessMemory& memory, const PythonInterpreter& interpreter,
                     const PythonObjectLayout& layout)
      : memory_(memory), interpreter_(interpreter), layout_(layout) {}

  const PythonObjectLayout& layout() const { return layout_; }
  const ProcessMemory& memory() const { return memory_; }

  absl::StatusOr<uint64_t> Pointer(uint64_t address) const;
  absl::StatusOr<uint64_t> TypeOf(uint64_t object) const;
  // tp_name of a type ("dict", "_asyncio.Task"); cached by type address.
  absl::StatusOr<std::string> TypeName(uint64_t type);
  // The tp_name of `object`'s type.
  absl::StatusOr<std::string> TypeNameOf(uint64_t object);
  // True when `object`'s type, or a base of it, has one of `names` as tp_name.
  absl::StatusOr<bool> IsInstance(uint64_t object, std::initializer_list<std::string_view> names);

  absl::StatusOr<std::string> Str(uint64_t object) const;
  // (key, value) of every live entry of a dict, combined or split.
  absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> DictItems(uint64_t dict);
  // The value under the str key `key`, or 0 when there is none.
  absl::StatusOr<uint64_t> DictGetStr(uint64_t dict, std::string_view key);
  // The keys of every live entry of a set (Unavailable when it kept changing
  // while read).
  absl::StatusOr<std::vector<uint64_t>> SetItems(uint64_t set);
  absl::StatusOr<std::vector<uint64_t>> ListItems(uint64_t list);
  absl::StatusOr<std::vector<uint64_t>> TupleItems(uint64_t tuple);
  // The object a weakref refers to, or 0 when it is dead.
  absl::StatusOr<uint64_t> WeakrefTarget(uint64_t weakref);
  // The instance attribute `name` (from the instance's __dict__, however this
  // version stores it), or 0 when there is none.
  absl::StatusOr<uint64_t> Attribute(uint64_t object, std::string_view name);

 private:
  // Where a set's slots are, as its head says at one read.
  struct SetTable {
    int64_t fill = 0;  // slots holding a key, live or deleted
    int64_t mask = 0;  // slots - 1
    uint64_t table = 0;
  };

  absl::Status ExpectType(uint64_t object, std::initializer_list<std::string_view> names,
                          std::string_view what);
  // Entries of a dict's keys object; values from `values` when it is split.
  absl::StatusOr<std::vector<std::pair<uint64_t, uint64_t>>> KeysItems(uint64_t keys,
                                                                       uint64_t values);
  absl::StatusOr<std::vector<uint64_t>> Sequence(uint64_t object, uint32_t items_offset,
                                                 std::string_view type_name);
  absl::StatusOr<SetTable> ReadSetHead(uint64_t set);

  const ProcessMemory& memory_;
  const PythonInterpreter& interpreter_;
  const PythonObjectLayout& layout_;
  absl::flat_hash_map<uint64_t, std::string> type_names_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_PYTHON_OBJECT_READER_H_

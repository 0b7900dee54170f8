// One table per command's flags: each row says how a flag is written, what
// value it takes, what --help says of it and how it sets the command's
// options, so that the parser, the usage text and (for record) the control
// protocol's request codec are made from one list and cannot drift apart.
//
// A row's setter and checks name the flag as the user wrote it ("-r takes a
// whole number of Hz ..."): the messages are the command's own.
#ifndef PYSTROBE_DAEMON_FLAGS_FLAG_TABLE_H_
#define PYSTROBE_DAEMON_FLAGS_FLAG_TABLE_H_

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/flags/flag_cursor.h"

namespace pystrobe {

// The flags a command line gave, by their last (long) name: for the checks
// between flags ("--alloc-sample-bytes is a setting of --allocations").
using FlagsGiven = std::set<std::string, std::less<>>;

// Usage text helpers, shared by every table (flag_table.cc).
namespace flag_usage {
// "  -r, --rate HZ        first line\n" and the help's other lines below it,
// each starting at `column`; names that leave less than two spaces before
// the column get a line of their own.
std::string Row(const std::vector<std::string>& names, absl::string_view value_name,
                absl::string_view help, bool help_only, size_t column);
}  // namespace flag_usage

template <typename Options>
struct Flag {
  using Setter = std::function<absl::Status(Options&, absl::string_view flag, std::string value)>;
  using WireEncoder = std::function<std::optional<std::string>(const Options&)>;
  using WireDecoder = std::function<absl::Status(Options&, absl::string_view value)>;

  // How it is written: {"-r", "--rate"}. The last is its name in FlagsGiven.
  std::vector<std::string> names;
  // The value's name in --help and in "--socket needs a PATH"; empty: a
  // switch, which takes no value ("--threads=yes" is an error).
  std::string value_name;
  // What --help says, lines already wrapped (each "\n" starts a new line
  // under the first).
  std::string help;
  // Takes the value (empty for a switch) into the options. Errors name
  // `flag` as written.
  Setter set;
  // "FLAG needs a ...": the word when the value is missing ("value" unless
  // the command has always said "PATH" or "FILE").
  std::string missing_value = "value";
  // -h/--help: reading stops here, nothing after it is read or checked.
  bool stops = false;
  // Shown in --help, never parsed: "-- COMMAND ARGS...".
  bool help_only = false;

  // The control protocol (record's requests): the key this flag travels
  // under as "key=value" ("" : it stays on the client), how its value is
  // written (nullopt: left out, the receiver's default) and read back.
  std::string wire_key;
  WireEncoder encode;
  WireDecoder decode;

  // The same flag, saying "FLAG needs a `word`" when its value is missing.
  Flag MissingValue(std::string word) && {
    missing_value = std::move(word);
    return std::move(*this);
  }

  // The same flag, travelling as `key`.
  Flag OnWire(std::string key, WireEncoder encoder, WireDecoder decoder) && {
    wire_key = std::move(key);
    encode = std::move(encoder);
    decode = std::move(decoder);
    return std::move(*this);
  }
};

// A flag that takes a value ("HZ") and hands it to `set`.
template <typename Options>
Flag<Options> ValueFlag(std::vector<std::string> names, std::string value_name, std::string help,
                        typename Flag<Options>::Setter set) {
  Flag<Options> flag;
  flag.names = std::move(names);
  flag.value_name = std::move(value_name);
  flag.help = std::move(help);
  flag.set = std::move(set);
  return flag;
}

// A switch that calls `set` (with an empty value).
template <typename Options>
Flag<Options> SwitchFlag(std::vector<std::string> names, std::string help,
                         typename Flag<Options>::Setter set) {
  return ValueFlag<Options>(std::move(names), "", std::move(help), std::move(set));
}

// A switch that sets `member`.
template <typename Options>
Flag<Options> SwitchFlag(std::vector<std::string> names, bool Options::*member, std::string help) {
  return SwitchFlag<Options>(std::move(names), std::move(help),
                             [member](Options& options, absl::string_view, const std::string&) {
                               options.*member = true;
                               return absl::OkStatus();
                             });
}

// A switch that travels as "key=1" (left out when off; "0" or "1" read).
template <typename Options>
Flag<Options> WireSwitchFlag(std::vector<std::string> names, bool Options::*member,
                             std::string help, std::string key) {
  return SwitchFlag<Options>(std::move(names), member, std::move(help))
      .OnWire(
          key,
          [member](const Options& options) -> std::optional<std::string> {
            if (!(options.*member)) return std::nullopt;
            return "1";
          },
          [member, key](Options& options, absl::string_view value) {
            if (value != "0" && value != "1") {
              return absl::InvalidArgumentError(absl::StrCat(key, " must be 0 or 1"));
            }
            options.*member = value == "1";
            return absl::OkStatus();
          });
}

// -h/--help: sets `member` and ends the reading.
template <typename Options>
Flag<Options> HelpFlag(bool Options::*member, std::string help) {
  Flag<Options> flag = SwitchFlag<Options>({"-h", "--help"}, member, std::move(help));
  flag.stops = true;
  return flag;
}

// A line of --help that is not a flag ("-- COMMAND ARGS...").
template <typename Options>
Flag<Options> HelpOnlyRow(std::string text, std::string help) {
  Flag<Options> flag;
  flag.names = {std::move(text)};
  flag.help = std::move(help);
  flag.help_only = true;
  return flag;
}

template <typename Options>
class FlagTable {
 public:
  struct Section {
    std::string heading;  // "Options:"; empty: none
    std::vector<Flag<Options>> flags;
  };
  struct Spec {
    // "record": unknown options read "unknown option '--x' (see pystrobe
    // record --help)".
    std::string command;
    // --help before the flags (the usage line and what the command does)
    // and after them (exit status, keys).
    std::string intro;
    std::vector<Section> sections;
    std::string outro;
    // The column each flag's help starts at.
    size_t help_column = 23;
    // An argument that is not a flag ("-" and words not starting with '-');
    // null: it is an unknown option.
    std::function<absl::Status(Options&, std::string)> positional;
    // "--" and everything after it (the command to run); null: "--" is an
    // unknown option.
    std::function<absl::Status(Options&, std::vector<std::string>)> rest;
    // Checks between flags, run once every flag is read (not after --help).
    std::function<absl::Status(Options&, const FlagsGiven&)> check;
  };

  explicit FlagTable(Spec spec) : spec_(std::move(spec)), usage_(Usage()) {}

  // The options `args` ask for, from the defaults of Options{}.
  absl::StatusOr<Options> Parse(const std::vector<std::string>& args) const {
    Options options;
    if (absl::Status s = Parse(args, options); !s.ok()) return s;
    return options;
  }

  // Reads `args` (the arguments after the command's name) into `options`,
  // which hold the defaults.
  absl::Status Parse(const std::vector<std::string>& args, Options& options) const {
    FlagsGiven given;
    FlagCursor cursor(args);
    while (!cursor.Done()) {
      std::string arg = cursor.Next();
      if (arg == "--" && spec_.rest) {
        if (absl::Status s = spec_.rest(options, cursor.Rest()); !s.ok()) return s;
        break;
      }
      const Flag<Options>* flag = Find(arg);
      if (flag == nullptr) {
        bool looks_like_flag = arg.starts_with("-") && arg != "-";
        if (spec_.positional && !looks_like_flag) {
          if (absl::Status s = spec_.positional(options, std::move(arg)); !s.ok()) return s;
          continue;
        }
        return absl::InvalidArgumentError(
            absl::StrCat("unknown option '", arg, "' (see pystrobe ", spec_.command, " --help)"));
      }
      std::string value;
      if (flag->value_name.empty()) {
        if (cursor.HadInlineValue()) {
          return absl::InvalidArgumentError(absl::StrCat(arg, " takes no value"));
        }
      } else {
        absl::StatusOr<std::string> read = cursor.Value(arg, flag->missing_value);
        if (!read.ok()) return read.status();
        value = std::move(*read);
      }
      if (absl::Status s = flag->set(options, arg, std::move(value)); !s.ok()) return s;
      if (flag->stops) return absl::OkStatus();
      given.insert(flag->names.back());
    }
    return spec_.check ? spec_.check(options, given) : absl::OkStatus();
  }

  // The --help text, made once.
  const char* UsageText() const { return usage_.c_str(); }

  // The --help text.
  std::string Usage() const {
    std::string out = spec_.intro;
    for (size_t i = 0; i < spec_.sections.size(); ++i) {
      const Section& section = spec_.sections[i];
      if (i > 0) out += "\n";
      if (!section.heading.empty()) absl::StrAppend(&out, section.heading, "\n");
      for (const Flag<Options>& flag : section.flags) {
        out += flag_usage::Row(flag.names, flag.value_name, flag.help, flag.help_only,
                               spec_.help_column);
      }
    }
    return out + spec_.outro;
  }

  // The flags that travel, as "key=value" lines.
  std::string EncodeWire(const Options& options) const {
    std::string out;
    for (const Section& section : spec_.sections) {
      for (const Flag<Options>& flag : section.flags) {
        if (flag.wire_key.empty()) continue;
        if (std::optional<std::string> value = flag.encode(options)) {
          absl::StrAppend(&out, flag.wire_key, "=", *value, "\n");
        }
      }
    }
    return out;
  }

  // Reads one "key=value" of a request into `options`. InvalidArgument
  // "unknown key KEY", or the flag's own complaint about the value.
  absl::Status DecodeWire(absl::string_view key, absl::string_view value, Options& options) const {
    for (const Section& section : spec_.sections) {
      for (const Flag<Options>& flag : section.flags) {
        if (!flag.wire_key.empty() && flag.wire_key == key) return flag.decode(options, value);
      }
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown key ", key));
  }

 private:
  const Flag<Options>* Find(const std::string& arg) const {
    for (const Section& section : spec_.sections) {
      for (const Flag<Options>& flag : section.flags) {
        if (flag.help_only) continue;
        for (const std::string& name : flag.names) {
          if (name == arg) return &flag;
        }
      }
    }
    return nullptr;
  }

  Spec spec_;
  std::string usage_;
};

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_FLAGS_FLAG_TABLE_H_

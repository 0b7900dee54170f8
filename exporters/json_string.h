// JSON string literals for everything pystrobe writes as JSON by hand (stat,
// dump, report, speedscope): names and paths come from the profiled
// processes, so any byte may appear in them.
#ifndef PYSTROBE_EXPORTERS_JSON_STRING_H_
#define PYSTROBE_EXPORTERS_JSON_STRING_H_

#include <string>
#include <string_view>

namespace pystrobe {

// `text` as a JSON string literal, quotes included. Bytes that are not valid
// UTF-8 (a comm, a file name) become U+FFFD so the output stays valid JSON.
std::string JsonString(std::string_view text);

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_JSON_STRING_H_

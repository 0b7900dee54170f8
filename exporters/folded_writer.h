// Folded stacks, the text format flamegraph.pl, inferno and speedscope read:
// "root;child;leaf 42", one line per distinct stack.
#ifndef PYSTROBE_EXPORTERS_FOLDED_WRITER_H_
#define PYSTROBE_EXPORTERS_FOLDED_WRITER_H_

#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "exporters/profile_writer.h"
#include "model/profile.h"

namespace pystrobe {

// Writes one line per distinct folded stack, sorted by its text so the same
// profile always gives the same file. Stacks whose names fold to the same text
// are merged into one line.
class FoldedWriter : public ProfileWriter {
 public:
  absl::Status Write(const Profile& profile, std::ostream& out) const override;
  std::string_view extension() const override { return "folded"; }
};

// `name` made safe as one field of a folded line: ';' (the frame separator)
// becomes ':', line breaks become spaces, and an empty name becomes
// "[unknown]" so no field is ever empty.
std::string FoldedFrameName(std::string_view name);

}  // namespace pystrobe

#endif  // PYSTROBE_EXPORTERS_FOLDED_WRITER_H_

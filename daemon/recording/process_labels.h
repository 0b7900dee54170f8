// Labels that belong to a sampled process rather than to a stack, for
// Profile::process_labels (the pprof writer puts them on every sample of the
// process, next to its pid): which CPython it runs, and, when it lives in a
// PID namespace below ours (a container), its pid there.
#ifndef PYSTROBE_DAEMON_RECORDING_PROCESS_LABELS_H_
#define PYSTROBE_DAEMON_RECORDING_PROCESS_LABELS_H_

#include <functional>
#include <initializer_list>
#include <vector>

#include "daemon/recording/process_table.h"
#include "daemon/recording/stack_aggregator.h"
#include "model/profile.h"

namespace pystrobe {

// The pid a process has inside its own PID namespace: what `ps` in its
// container shows, beside `pid` (the host's). Only set when the two differ.
inline constexpr char kPidInNamespaceLabel[] = "pid_in_namespace";

// python_version and pid_in_namespace, those that are known.
std::vector<ProfileLabel> ProcessImageLabels(const ProcessImage& image);

// For every process with a stack in `stacks`, sets profile.process_labels
// of its pid to `first(image)` (when given: e.g. its container) followed by
// ProcessImageLabels(image). A pid that has labels already keeps them (its
// earlier image in this profile, or an earlier call).
void AddProcessLabels(
    const ProcessTable& processes, std::initializer_list<const StackAggregator*> stacks,
    Profile& profile,
    const std::function<std::vector<ProfileLabel>(const ProcessImage&)>& first = {});

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_RECORDING_PROCESS_LABELS_H_

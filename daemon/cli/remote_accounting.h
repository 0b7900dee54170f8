// `pystrobe stat --pid` and `pystrobe top` through a running daemon's
// control socket (daemon/control/control_protocol.h): the daemon measures with the
// accounting and sampler it already runs; these print what it answers.
#ifndef PYSTROBE_DAEMON_CLI_REMOTE_ACCOUNTING_H_
#define PYSTROBE_DAEMON_CLI_REMOTE_ACCOUNTING_H_

#include <optional>
#include <vector>

#include "daemon/accounting/top_screen.h"
#include "daemon/cli/accounting_options.h"
#include "daemon/cli/control_client.h"
#include "daemon/control/control_protocol.h"

namespace pystrobe {

// nullopt when stat must run locally (--no-daemon, a command to start,
// --syscalls, no daemon answering); else the exit status, the report
// printed.
std::optional<int> MaybeStatThroughDaemon(const StatOptions& options,
                                          const DaemonClientFlags& flags);

// nullopt when top must run locally (--no-daemon, no daemon answering);
// else the exit status, the screens printed.
std::optional<int> MaybeTopThroughDaemon(const TopOptions& options, const DaemonClientFlags& flags);

// The rows of a snapshot as the local top has them; the process rows' RSS
// growth is since the last snapshot `rss_growth` saw.
std::vector<TopRow> TopRowsFrom(const TopSnapshot& snapshot, ResidentGrowth& rss_growth);
// The snapshot's GPU section, where there is one: the screen's GPU lines and
// its process rows' GPU columns.
void AddGpuFigures(const TopSnapshot& snapshot, TopScreen& screen);

}  // namespace pystrobe

#endif  // PYSTROBE_DAEMON_CLI_REMOTE_ACCOUNTING_H_

// The third way an alert notifies: a shell command run with the event's JSON on its stdin
// (`[[alerts]]` key `command`), for whatever the site uses (a pager CLI, a chat client, a
// script that files a ticket). Not here: the webhook and e-mail (monitor/notify.h).
#pragma once

#include <atomic>
#include <string>

#include "core/status.h"

namespace trident::monitor {

// Runs `/bin/sh -c command` with `input` on stdin (from a temporary file: no pipe, so a command
// that ignores its input never blocks or SIGPIPEs the run) and waits for it, at most
// `timeout_s` seconds; then its process group is killed. An error names the command and its
// exit status, signal or timeout; the caller logs it (a failed notification must not stop
// training). Uses posix_spawn (no fork of a threaded MPI process). When `abort` is set and
// becomes true, the command is killed as at its timeout (the run is ending).
[[nodiscard]] Status run_notify_command(const std::string& command, const std::string& input, double timeout_s = 30.0,
                                        const std::atomic<bool>* abort = nullptr);

}  // namespace trident::monitor

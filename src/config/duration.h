// Wall-clock durations in config values (train.max_runtime): "45m", "2h30m", "1.5h", "90s",
// "1d", "04:00:00" or "1-12:00:00" (Slurm's [D-]HH:MM:SS, as in `sbatch --time`), and "0"
// for none. A bare number other than 0 is refused: Slurm and Megatron read it as minutes,
// others as seconds, and a budget read the wrong way is a lost run.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace trident::config {

// Seconds, or nullopt when `text` is not a duration of the forms above.
std::optional<double> parse_duration(std::string_view text);

// What parse_duration accepts, for error messages.
inline constexpr const char* kDurationForms =
    "a duration such as 90s, 45m, 2h30m, 1.5h, 1d, 04:00:00 or 1-12:00:00 ([D-]HH:MM:SS), or 0 for none";

}  // namespace trident::config

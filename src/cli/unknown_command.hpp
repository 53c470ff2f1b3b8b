#pragma once
// A command line whose verb gpuorch does not know gets one line naming it and the closest verbs
// ("unknown command 'shedule'; did you mean 'scheduler'? See gpuorch --help"), instead of CLI11's
// "A subcommand is required".
#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuorch::cli {

// Edits (insertions, deletions, substitutions, swaps of neighbours) turning `a` into `b`.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The verbs a mistyped `word` most likely meant: those it starts (or is the start of), else the
// nearest within a third of its length (at least one edit); empty when none is near.
std::vector<std::string> closest_names(std::string_view word,
                                       const std::vector<std::string>& names);

// The message for `args` (the words after `gpuorch`) when they name no verb, or a verb group
// (`sim`, `doctor`, ...) without one of its verbs; nothing when the verbs are known (options and
// everything after the verbs are CLI11's to check).
std::optional<std::string> unknown_command(const CLI::App& app,
                                           const std::vector<std::string>& args);

}  // namespace gpuorch::cli

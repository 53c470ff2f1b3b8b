#pragma once
// The whole command tree of `gpuorch`: every verb, its flags, its help (defaults and examples).
// main.cpp runs it; the tests build it to check every verb's --help.
#include <CLI/CLI.hpp>
#include <memory>

#include "cli/verbs.hpp"

namespace gpuorch::cli {

// The parsed verb stores what to run in `action`.
std::unique_ptr<CLI::App> make_app(Action& action);

}  // namespace gpuorch::cli

// gpuorch: one binary, one verb per file. Exit codes: 0 ok, 1 failure, 2 bad usage or input.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/app.hpp"
#include "cli/build_info.hpp"
#include "cli/unknown_command.hpp"
#include "gpuorch/base/error.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // Before the tree is built: `--version` needs none of it.
  if (args == std::vector<std::string>{"--version"}) {
    fmt::print("{}", gpuorch::cli::version_text());
    return 0;
  }
  if (args == std::vector<std::string>{"--version", "--json"} ||
      args == std::vector<std::string>{"--json", "--version"}) {
    fmt::print("{}", gpuorch::cli::version_json());
    return 0;
  }
  gpuorch::cli::Action action;
  const auto app = gpuorch::cli::make_app(action);
  if (const auto unknown = gpuorch::cli::unknown_command(*app, args)) {
    fmt::print(stderr, "gpuorch: {}\n", *unknown);
    return 2;
  }
  try {
    gpuorch::cli::mark_launch_program(*app, args);
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    app->parse(args);
  } catch (const CLI::Success& e) {
    return app->exit(e);
  } catch (const CLI::ParseError& e) {
    app->exit(e);
    return 2;
  }
  try {
    return action ? action() : 2;
  } catch (const gpuorch::base::InputError& e) {
    fmt::print(stderr, "gpuorch: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpuorch: error: {}\n", e.what());
    return 1;
  }
}

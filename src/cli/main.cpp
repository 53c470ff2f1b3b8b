// gpuorch: one binary, one verb per file. Exit codes: 0 ok, 1 failure, 2 bad usage or input.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/verbs.hpp"
#include "gpuorch/base/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"gpuorch: keeps GPU clusters busy for distributed training", "gpuorch"};
  app.set_version_flag("--version", GPUORCH_VERSION);
  app.require_subcommand(1);
  gpuorch::cli::Action action;

  CLI::App* sim = app.add_subcommand("sim", "Simulate the scheduler core on traces");
  sim->require_subcommand(1);
  gpuorch::cli::add_sim_fill(*sim, action);
  gpuorch::cli::add_sim_arrivals(*sim, action);
  gpuorch::cli::add_sim_scale(*sim, action);
  gpuorch::cli::add_sim_timeline(*sim, action);
  gpuorch::cli::add_topo(app, action);
  gpuorch::cli::add_dmon(app, action);
  gpuorch::cli::add_exporter(app, action);
  gpuorch::cli::add_scheduler(app, action);
  gpuorch::cli::add_extender(app, action);
  gpuorch::cli::add_bench(app, action);
  gpuorch::cli::add_tune(app, action);
  gpuorch::cli::add_device_plugin(app, action);
  gpuorch::cli::add_manifests(app, action);
  gpuorch::cli::add_node_labeller(app, action);
  gpuorch::cli::add_launch(app, action);
  gpuorch::cli::add_doctor(app, action);

  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    gpuorch::cli::mark_launch_program(app, args);
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    app.parse(args);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
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

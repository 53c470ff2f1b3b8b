#include "cli/app.hpp"

#include <memory>

#include "cli/build_info.hpp"
#include "cli/help.hpp"

namespace gpuorch::cli {

std::unique_ptr<CLI::App> make_app(Action& action) {
  auto app = std::make_unique<CLI::App>("gpuorch: keeps GPU clusters busy for distributed training",
                                        "gpuorch");
  // Inherited by every verb added below: help shows each option's initial value as its default.
  app->formatter(std::make_shared<HelpFormatter>());
  app->option_defaults()->always_capture_default();
  // main.cpp answers --version (and --version --json) before parsing; this is its help line.
  app->set_version_flag("--version", version_text(),
                        "Print the version, git commit, build type and compiler, then exit "
                        "(--version --json: as JSON)");
  app->require_subcommand(1);

  CLI::App* sim = app->add_subcommand("sim", "Simulate the scheduler core on traces");
  sim->require_subcommand(1);
  add_sim_fill(*sim, action);
  add_sim_arrivals(*sim, action);
  add_sim_scale(*sim, action);
  add_sim_timeline(*sim, action);
  add_topo(*app, action);
  add_dmon(*app, action);
  add_exporter(*app, action);
  add_scheduler(*app, action);
  add_extender(*app, action);
  add_admission_check(*app, action);
  add_bench(*app, action);
  add_tune(*app, action);
  add_device_plugin(*app, action);
  add_manifests(*app, action);
  add_node_labeller(*app, action);
  add_dra_driver(*app, action);
  add_launch(*app, action);
  add_doctor(*app, action);
  add_examples(*app);
  return app;
}

}  // namespace gpuorch::cli

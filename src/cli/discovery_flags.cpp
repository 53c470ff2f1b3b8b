#include "discovery_flags.hpp"

#include <fmt/format.h>

namespace gpuorch::cli {

void add_discovery_flags(CLI::App* cmd, DiscoveryFlags& flags, const std::string& sysfs_help) {
  cmd->add_option("--sysfs-root", flags.options.root, sysfs_help)->capture_default_str();
  cmd->add_flag("--no-nvml", flags.no_nvml, "Do not use NVML (or a recording's nvml.json)");
  cmd->add_option("--nvml-library", flags.options.nvml_library,
                  "NVML shared library to dlopen on a live host")
      ->capture_default_str();
}

discover::Discovery discover_with_warnings(const DiscoveryFlags& flags) {
  discover::Options o = flags.options;
  o.use_nvml = !flags.no_nvml;
  auto d = discover::discover_host(o);
  for (const auto& p : d.problems) fmt::print(stderr, "gpuorch: warning: {}\n", p);
  return d;
}

}  // namespace gpuorch::cli

#pragma once
// The discovery flags every verb that reads the host shares (--sysfs-root, --no-nvml,
// --nvml-library) and the one way they discover: problems printed once each on stderr as
// warnings, so stdout stays machine-readable.
#include <CLI/CLI.hpp>
#include <string>

#include "gpuorch/discover/discover.hpp"

namespace gpuorch::cli {

struct DiscoveryFlags {
  discover::Options options;
  bool no_nvml = false;
};

// `sysfs_help` says what the verb does with a recording ("Serve a recorded tree ...").
void add_discovery_flags(CLI::App* cmd, DiscoveryFlags& flags, const std::string& sysfs_help);

discover::Discovery discover_with_warnings(const DiscoveryFlags& flags);

}  // namespace gpuorch::cli

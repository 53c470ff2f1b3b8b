#pragma once
// Discovery: one call that turns a live host, or a recorded tree, into a topology::Host.
#include <memory>
#include <string>
#include <vector>

#include "gpuorch/discover/hwloc_topology.hpp"
#include "gpuorch/discover/nvml.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::discover {

struct Options {
  std::string root = "/";  // or a recording (`--sysfs-root DIR`)
  bool use_nvml = true;
  std::string nvml_library = "libnvidia-ml.so.1";  // live hosts only; recordings use nvml.json
};

struct Discovery {
  topology::Host host;
  std::vector<std::string> problems;  // "path: problem", each once
  std::unique_ptr<Nvml> nvml;         // kept open for telemetry; null without NVML
};

// Throws base::InputError when `root` is not a directory holding a sys/ tree.
Discovery discover_host(const Options& options);

// Copies what discovery reads from the live host into `dir` (sysfs/procfs files and their
// relative symlinks, hwloc.xml, nvml.json with `samples` readings per GPU), so that
// `--sysfs-root dir` sees the same host. Written to a temporary sibling and renamed.
void record_host(const Options& options, const std::string& dir, int samples);

}  // namespace gpuorch::discover

#pragma once
// The inverse of `gpuorch topo --json`: a topology::Host from its JSON (gpuorch.topology/v1), for
// the static inventory mode of the device plugin (`--topology FILE`) and for tests. Reads the
// model (CPUs, NUMA nodes, GPUs with MIG instances, NICs with ports, pairwise links); figures
// derived from it (cpu_affinity, numa_affinity, devices) are not read back.
#include <nlohmann/json.hpp>
#include <string>

#include "gpuorch/topology/host.hpp"

namespace gpuorch::topology {

// Throws base::InputError "file: what" (with the line for malformed JSON).
Host host_from_json_text(const std::string& text, const std::string& file);
Host load_host_json(const std::string& path);

}  // namespace gpuorch::topology

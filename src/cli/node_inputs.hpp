#pragma once
// The node list `gpuorch sim fill --nodes` and `sim timeline --nodes` read (docs/inputs.md): a
// YAML inventory (.yaml, .yml), a cluster's ResourceSlices (.json: `kubectl get
// nodes,resourceslices -o json`), or openb's node CSV.
#include <string>
#include <vector>

#include "gpuorch/cluster/node_spec.hpp"

namespace gpuorch::cli {

std::vector<cluster::NodeSpec> load_node_list(const std::string& path);

}  // namespace gpuorch::cli

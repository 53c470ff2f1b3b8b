#pragma once
// gpuorch's own cluster inventory (YAML): node templates times a count, so users can describe
// their cluster without a trace. Format: docs/inputs.md.
#include <string>
#include <vector>

#include "gpuorch/cluster/node_spec.hpp"

namespace gpuorch::io {

std::vector<cluster::NodeSpec> load_inventory(const std::string& path);
std::vector<cluster::NodeSpec> parse_inventory(const std::string& text, const std::string& path);

}  // namespace gpuorch::io

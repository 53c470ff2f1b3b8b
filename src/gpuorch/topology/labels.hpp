#pragma once
// Kubernetes node labels for a Host (gpu-feature-discovery's names for NVIDIA, the AMD node
// labeller's for AMD, gpuorch.io/* for topology) and the cluster::NodeSpec the scheduler core
// consumes, so a live host, a YAML inventory and a trace all become the same cluster::Node.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpuorch/cluster/node_spec.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::topology {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Sorted by key; values are valid Kubernetes label values.
Labels node_labels(const Host& host);
// "H100-80GB-HBM3", "T4", "Instinct-MI250": the model name the scheduler and inventories use.
std::string short_model(const std::string& marketing_name);
// With the GPU link matrix (topology::gpu_link_scores) when the host has two or more GPUs and any
// link between them known.
cluster::NodeSpec node_spec(const Host& host);
// The NodeSpec as a gpuorch YAML inventory (docs/inputs.md) that io::load_inventory reads.
std::string inventory_yaml(const cluster::NodeSpec& spec);
// A label value made valid: [A-Za-z0-9] at both ends, [-_.A-Za-z0-9] inside, at most 63 chars.
std::string label_value(const std::string& text, char space = '-');

}  // namespace gpuorch::topology

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
// How well GPUs a and b (indices into host.gpus) are connected, on the scale of
// cluster::NodeSpec::gpu_links: SYS 10, NODE 20, PHB 30, PXB 40, PIX 50, NV# 100 + 5 x # (at
// most 250), XGMI 100 + 600 / KFD weight (100 when the weight is unknown), 0 when no link is
// known; + 5 when both GPUs are on one NUMA node.
std::uint8_t gpu_link_strength(const Host& host, std::size_t a, std::size_t b);
// The PCIe/CPU part of every link ranking (the scheduler's matrix, the device plugin's pair
// score): PIX 50, PXB 40, PHB 30, NODE 20, SYS 10; 0 for NV# and XGMI, which each ranking scales
// by its own units.
int pcie_path_strength(Path path);
// With the GPU link matrix when the host has two or more GPUs and any link between them known.
cluster::NodeSpec node_spec(const Host& host);
// The NodeSpec as a gpuorch YAML inventory (docs/inputs.md) that io::load_inventory reads.
std::string inventory_yaml(const cluster::NodeSpec& spec);
// A label value made valid: [A-Za-z0-9] at both ends, [-_.A-Za-z0-9] inside, at most 63 chars.
std::string label_value(const std::string& text, char space = '-');

}  // namespace gpuorch::topology

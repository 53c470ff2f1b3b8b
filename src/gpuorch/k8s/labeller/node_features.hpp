#pragma once
// What the node labeller publishes on a Node (docs/labeller.md): the labels NVIDIA's GPU Feature
// Discovery (GFD) would write for this host under this device-plugin config (the sharing labels
// `nvidia.com/gpu.replicas`, `gpu.sharing-strategy`, the `-SHARED` product suffix; the MIG
// strategy and MIG device labels), the AMD and gpuorch.io labels of topology::node_labels, and
// gpuorch's topology annotation (NVLink islands, each GPU's NUMA node, the GPU link matrix:
// topology_annotation.hpp). Pure: the same host and config always give the same features, so a
// refresh that changes nothing writes nothing.
#include <string>

#include "gpuorch/k8s/deviceplugin/config.hpp"
#include "gpuorch/k8s/mirror/topology_annotation.hpp"
#include "gpuorch/topology/host.hpp"
#include "gpuorch/topology/labels.hpp"

namespace gpuorch::k8s {

struct NodeFeatures {
  topology::Labels labels;       // sorted by key
  topology::Labels annotations;  // sorted by key
};

// Throws base::InputError when the config cannot apply to the host (as plan_resources does:
// MIG strategy single over different profiles, a sharing entry naming a missing device).
NodeFeatures node_features(const topology::Host& host, const PluginConfig& config);

// GPUs joined by NVLink or xGMI, transitively: each island's GPU indices (into host.gpus),
// ascending; a GPU without such a link is an island of its own.
std::vector<std::vector<int>> nvlink_islands(const topology::Host& host);

}  // namespace gpuorch::k8s

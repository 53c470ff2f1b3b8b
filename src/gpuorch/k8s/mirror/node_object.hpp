#pragma once
// A Kubernetes Node as the scheduler core sees it: allocatable CPU, memory, GPUs and pods, the
// GPU model (GFD's nvidia.com/gpu.product label, or the labels `gpuorch topo --labels` writes),
// labels, taints, the cordon, and the GPU link matrix of the node labeller's topology annotation.
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "gpuorch/cluster/node_spec.hpp"

namespace gpuorch::k8s {

// GPU resources a node may advertise, in the order they are looked for.
inline constexpr const char* kGpuResources[] = {"nvidia.com/gpu", "amd.com/gpu"};
// Labels that name the GPU model, in the order they are looked for.
inline constexpr const char* kGpuModelLabels[] = {"nvidia.com/gpu.product", "amd.com/gpu.product",
                                                  "gpu-model"};

// The node, or one line saying why it cannot be scheduled onto ("allocatable cpu 'x': not a
// quantity"); such a node is left out of the cluster, never guessed at.
std::variant<cluster::NodeSpec, std::string> node_from_json(const nlohmann::json& node);

// metadata.name of any Kubernetes object, or "" when the text is not shaped like one (a peer's
// JSON: an array where an object belongs must not reach a JSON pointer or a const operator[]).
std::string object_name(const nlohmann::json& object);

}  // namespace gpuorch::k8s

#pragma once
// A cluster's ResourceSlices as an inventory for `gpuorch sim` (docs/inputs.md): the list
// `kubectl get nodes,resourceslices -o json` (or `kubectl get resourceslices -o json` alone)
// becomes cluster::NodeSpecs through the same translation gpuorch scheduler's mirror uses
// (DraInventory: the whole GPUs of gpu.gpuorch.io, their model, memory and link matrix). It
// lives here, not in io/, because the translation reads the Kubernetes API's objects
// (quantities, the Node reader) of this layer, which io/ may not include; the CLI joins both.
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/cluster/node_spec.hpp"

namespace gpuorch::k8s {

// What a node with slices but no Node object in the list gets: CPU and memory are not known,
// so they do not limit (GPUs decide).
inline constexpr std::int64_t kUnlimitedCpuMilli = std::int64_t{1'000'000'000};
inline constexpr std::int64_t kUnlimitedMemoryMib = std::int64_t{1} << 30;

// The nodes with DRA GPUs of `list` (a v1 List, or a ResourceSliceList), by name; Nodes without
// one are left out (they have no GPU in the simulator's terms). Throws base::InputError
// "file: ..." for a list that is not one, or that has no slice of a whole GPU.
std::vector<cluster::NodeSpec> nodes_from_resource_slices(const nlohmann::json& list,
                                                          const std::string& file);
std::vector<cluster::NodeSpec> load_resource_slices(const std::string& path);

}  // namespace gpuorch::k8s

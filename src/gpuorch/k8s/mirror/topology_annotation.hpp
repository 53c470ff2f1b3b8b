#pragma once
// gpuorch's topology annotation on a Node (docs/labeller.md): what the node labeller writes of
// the host's GPUs and what the scheduler reads back. Labels cannot carry a matrix, and Node
// objects carry no link data, so without it `gpuorch scheduler` and the extender would take the
// lowest free GPUs while the device plugin on the node picks by links: the `links` matrix here is
// the one both read (topology::gpu_link_scores), so the two choose the same GPUs.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpuorch/topology/host.hpp"

namespace gpuorch::k8s {

// JSON: {"gpus":[{"index","uuid","numa_node","island"}],"nvlink_islands":[[0,1],...],
// "links":[[0,137,...],...]}; `links` (NodeSpec::gpu_links of the host, rows and columns in the
// order of `gpus`) only when the host's links are known.
inline constexpr const char* kTopologyAnnotation = "gpuorch.io/topology";

// The annotation's text for the host; `islands` as nvlink_islands(host) gives them.
std::string topology_annotation(const topology::Host& host,
                                const std::vector<std::vector<int>>& islands);

// NodeSpec::gpu_links from the annotation's text: its `links` when that is a symmetric
// gpu_count x gpu_count matrix of integers 0..255 (the diagonal is not read, and is 0), else
// empty (the GPU picker's lowest free GPUs). Never throws: a Node is scheduled onto whatever its
// annotation holds, the links only steer the choice of GPUs.
std::vector<std::uint8_t> annotated_gpu_links(std::string_view annotation, int gpu_count);

}  // namespace gpuorch::k8s

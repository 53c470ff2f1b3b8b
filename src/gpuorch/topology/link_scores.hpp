#pragma once
// The one scale on which gpuorch compares how well two GPUs of a host are connected. The
// scheduler core's GPU picker (cluster::NodeSpec::gpu_links, sched/gpu_picker.hpp), the device
// plugin's preferred allocation (k8s/deviceplugin/preferred.cpp) and the launcher's choice of GPUs
// (launch/plan.cpp) all read this matrix, so a pod gets the same GPUs whichever of them decides.
//
// score = 2 x the link's class + 1 when both GPUs sit on one known NUMA node (docs/topology.md,
// "GPU link scores"). The class orders the connection: no link known 0, SYS 5, NODE 10, PHB 15,
// PXB 20, PIX 25, NV# 50 + # (NV1 51 .. NV64 114), XGMI 50 + max(1, 60 / KFD weight) (counted as
// that many NVLinks: weight 15 inside an MI250 package = 4, 30 across = 2). The NUMA bit is the
// lowest, so it only breaks ties between pairs of one class; the picker also sums classes and
// NUMA bits apart (gpu_link_class, gpu_link_numa), so no number of NUMA bits outweighs one class.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpuorch/topology/host.hpp"

namespace gpuorch::topology {

// NV# and XGMI classes start above every PCIe path (PIX 25).
inline constexpr int kNvLinkClassBase = 50;
// NVLink counts above this score as this many (the JSON loader accepts NV1 .. NV64).
inline constexpr int kMaxScoredNvLinks = 64;
// The highest score of two different GPUs: NV64 on one NUMA node.
inline constexpr int kMaxGpuLinkScore = 2 * (kNvLinkClassBase + kMaxScoredNvLinks) + 1;

// GPUs a and b (indices into host.gpus); 0 for a == b.
std::uint8_t gpu_link_score(const Host& host, std::size_t a, std::size_t b);
// Every pair: host.gpus.size() squared entries, row-major, symmetric, the diagonal 0.
std::vector<std::uint8_t> gpu_link_scores(const Host& host);

// The two parts of a score (of this scale, or any matrix an inventory gives): the link class and
// the same-NUMA tie-break.
constexpr int gpu_link_class(int score) { return score >> 1; }
constexpr int gpu_link_numa(int score) { return score & 1; }

}  // namespace gpuorch::topology

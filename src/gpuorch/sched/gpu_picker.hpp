#pragma once
// The one GPU picker inside a node that knows how the GPUs are connected (NVLink islands, PCIe
// switches, NUMA nodes). The scheduler core (Policy::choose_gpus, for topology-aware policies)
// and the device plugin's GetPreferredAllocation (k8s/deviceplugin/preferred.cpp) both call it, so
// a pod gets the same GPUs whichever of them decides.
//
// The rule (docs/device-plugin.md, "GetPreferredAllocation: the rule"): of all sets of `count`
// members that contain the fixed ones, the set whose pairs are best connected wins: the highest
// weakest pair, then the highest sum of pair strengths; among equal sets, the one least connected
// to the candidates it leaves over (the sum of its members' strengths to them), so a well
// connected island stays whole for a later, larger request; then the lowest indices (the sorted
// sets compared lexicographically). Strengths are on the scale of topology/link_scores.hpp: sums
// add the link classes (strength / 2) first and the same-NUMA bits (strength % 2) only on a tie.
// Exhaustive when there are at most kExactPickLimit candidate sets, greedy beyond; deterministic
// either way.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gpuorch::sched {

// Up to this many candidate sets (C(candidates, count - fixed)) are searched exhaustively.
inline constexpr long long kExactPickLimit = 20000;

// `links` is an n x n row-major matrix of link strengths (topology::gpu_link_scores, larger =
// better connected), symmetric;
// the diagonal is not read. `candidates` and `fixed` are indices below n (duplicates ignored; a
// fixed index need not be a candidate). Returns the chosen set, fixed members included, in
// ascending order: every candidate and fixed index when they are `count` or fewer. Throws
// std::invalid_argument when links is not n x n or an index is out of range.
std::vector<int> pick_connected(std::size_t n, std::span<const int> links,
                                std::span<const int> candidates, std::span<const int> fixed,
                                int count);

// The scheduler's form: `count` fully free GPUs of a node (free milli == one whole GPU) by the
// node's link matrix (cluster::NodeSpec::gpu_links, gpu_left.size() squared entries). With an
// empty matrix it is exactly lowest_free_gpus(gpu_left, count); with fewer than `count` free
// GPUs, all of them, as lowest_free_gpus returns. Throws std::invalid_argument for a matrix of
// another size.
std::vector<int> pick_gpus(std::span<const std::int32_t> gpu_left, int count,
                           std::span<const std::uint8_t> links);

// pick_gpus inside groups (a DRA claim's eligible devices, one group per matchAttribute value):
// `count` fully free GPUs all of one group. Each group with room gets the picker's best set; the
// sets are compared by the same rule (weakest pair, sum, then the least tied to the free GPUs
// left over anywhere on the node, then the lowest indices). Without a matrix: the lowest free
// GPUs of the first group with room. Empty when no group has room. Indices outside the node are
// ignored.
std::vector<int> pick_gpus_in_groups(std::span<const std::int32_t> gpu_left, int count,
                                     std::span<const std::uint8_t> links,
                                     std::span<const std::vector<int>> groups);

}  // namespace gpuorch::sched

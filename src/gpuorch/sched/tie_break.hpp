#pragma once
// A seeded ranking of nodes by name, for tie-breaks that do not depend on the order nodes were
// listed in: the Kubernetes scheduler learns nodes from the API server in its own order and as
// they come and go, and `sim fill --tie-break names` ranks the same nodes the same way, so a replay
// of a trace on a real cluster can be compared with the simulator pod by pod.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpuorch/cluster/node_spec.hpp"

namespace gpuorch::sched {

// The position of a name in the seed's order (a hash of seed and name; ties by name).
std::uint64_t name_rank_key(std::uint64_t seed, const std::string& name);
// rank[n] for every node: 0 for the node whose key is smallest. Dense, as set_tie_break_rank takes.
std::vector<std::uint32_t> name_ranking(std::uint64_t seed,
                                        std::span<const cluster::NodeSpec> nodes);

}  // namespace gpuorch::sched

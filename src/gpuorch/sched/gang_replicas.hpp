#pragma once
// Gangs of identical one-GPU replicas (a data-parallel training job) spread over nodes: how many
// of a job's GPUs go on which node, all or nothing, the GPUs inside each node chosen by the one
// GPU picker (gpu_picker.hpp). place_gang() places pods that are already cut per node; the
// time-based simulator (sim/timeline_*) decides a replica count and lets this choose the cut.
#include <optional>
#include <span>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"

namespace gpuorch::sched {

enum class ReplicaSpread : std::uint8_t {
  // Repeatedly the node with the most free GPUs (lowest index on ties), as many as it has:
  // the rule of the Pollux artifact's Tiresias and Optimus placements.
  kMostFreeFirst,
  // The fewest nodes, then the tightest fit: one node when one can hold the job (the one with
  // the fewest free GPUs that still fits, so larger holes stay whole for larger jobs); otherwise
  // whole free nodes first and the remainder best-fit.
  kFewestNodes,
};

// Places `gpus` whole GPUs; applies and returns one placement per node used (in placement
// order), or nullopt with the cluster unchanged when the free GPUs do not suffice.
std::optional<std::vector<cluster::Placement>> place_replicas(cluster::Cluster& cluster, int gpus,
                                                              ReplicaSpread spread);

// `count` whole GPUs on one given node (the caller has chosen the node): applied and returned,
// or nullopt with the cluster unchanged when the node has fewer free GPUs.
std::optional<cluster::Placement> place_on_node(cluster::Cluster& cluster, cluster::NodeIndex node,
                                                int count);

void release_all(cluster::Cluster& cluster, std::span<const cluster::Placement> placements);

}  // namespace gpuorch::sched

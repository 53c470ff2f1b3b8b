#pragma once
// Gangs of identical replicas (a data-parallel training job: workload::JobSpec::replica, by
// default one whole GPU): `count` replicas placed all or nothing through the scheduler core, so
// its filters (GPU model, CPU, memory, node constraints), the policy's scores and tie-break and
// the GPU picker decide every node and GPU. The spreading rule is the scheduler's policy:
//   most-free     repeatedly the node with the most free GPUs (lowest index on ties), as many
//                 replicas as it holds: the Pollux artifact's Tiresias and Optimus placement;
//   tightest-fit  the fewest nodes: a gang one node holds goes to the tightest such node (larger
//                 holes stay whole), a larger one takes whole free nodes and the remainder
//                 best-fit (Kueue's topology-aware BestFit);
//   efd or any other policy, for replicas that are shares of a GPU or CPU-only.
// Both follow from one loop: each step asks the scheduler for the largest bundle of the replicas
// still to place that some node holds now, so one node takes as many replicas as the policy gives
// it. A bundle's GPUs are chosen together (so the picker keeps a node's replicas on its best
// links) and then bound as one placement per replica, each the pod it is (or, for a driver that
// counts GPUs per node and no pods, as one placement per node: ReplicaGang::placement_per_replica).
//
// A gang that already runs (an elastic job growing) grows next to its replicas without moving
// them: on its own nodes first, then, per topology level from the innermost, on nodes sharing a
// domain with them, then anywhere. A new gang with topology levels goes under the lowest level
// that holds it whole, on the fewest nodes of a domain there (as place_gang, sched/gang.hpp).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "gpuorch/workload/pod_spec.hpp"

namespace gpuorch::sched {

// The two spreading rules of the time-based simulator's policies, by their policy names.
enum class ReplicaSpread : std::uint8_t {
  kMostFreeFirst,  // "most-free"
  kFewestNodes,    // "tightest-fit"
};
std::string_view spread_policy(ReplicaSpread spread);

struct ReplicaGang {
  workload::PodSpec replica;  // one replica's request
  int count = 0;              // replicas to add now, all or nothing
  // Node label keys, outermost first (block, rack, hostname), as JobSpec::topology_levels.
  std::vector<std::string> topology_levels;
  // The gang's placements that already run, applied in the cluster (growth goes next to them;
  // they are not touched).
  std::span<const cluster::Placement> running;
  // false: a node's whole-GPU replicas as one placement (one pod for the cluster's pod count and
  // pods-per-node limit). The time-based simulator's jobs count GPUs per node and its rounds copy
  // every job's placements: per replica, about 1.5 times the time on Philly.
  bool placement_per_replica = true;
};

struct ReplicaGangDecision {
  bool placed = false;
  // The new placements, applied: one per replica (or per node, see above), a node's replicas
  // next to each other, nodes in the order they were chosen.
  std::vector<cluster::Placement> placements;
  std::string domain;  // "rack=r1" when a topology level held the new gang; else empty
  // When not placed (the cluster unchanged): why, in the core's terms. When too few GPUs are free
  // in all, the decision of the whole remainder as one request (its nodes lack that many free
  // GPUs; waiting, or infeasible when the gang exceeds the cluster); otherwise the decision of
  // the first replica that found no node once the others had room (fragmentation, a GPU model
  // or node constraint, CPU or memory).
  Decision failure;
  int placeable = 0;  // replicas that had found room when the gang failed
};

// Places `gang.count` replicas or none through `scheduler` (whose policy is the spreading rule);
// `resolver` must be the one the scheduler's requests come from.
ReplicaGangDecision place_replica_gang(cluster::Cluster& cluster, Scheduler& scheduler,
                                       RequestResolver& resolver, const ReplicaGang& gang);

// Gives a gang's placements back (in reverse order, the exact inverse of placing them).
void release_placements(cluster::Cluster& cluster, std::span<const cluster::Placement> placements);

}  // namespace gpuorch::sched

#pragma once
// Gangs: a group of pods that runs only when all of them do (a distributed training job's
// replicas). Placed all or nothing: every member is reserved in turn through the same Scheduler
// as any pod, and if one finds no node every reservation is undone, so a gang that cannot run
// holds nothing. With topology levels (node label keys, outermost first: block, rack, hostname,
// as Kueue's and KAI's topology-aware scheduling name them) the gang goes under the lowest level
// that can hold it whole, on the fewest nodes of any domain at that level.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/pod_request.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "gpuorch/workload/pod_spec.hpp"

namespace gpuorch::sched {

struct GangDecision {
  bool placed = false;
  std::vector<cluster::Placement> placements;  // per member, in order, when placed
  std::string domain;  // "rack=r1" where the gang went; empty: no topology level held it
  // When not placed: the first member that found no node, and why (the cluster-wide try).
  std::size_t failed_member = 0;
  Decision failure;
};

// The domains of one topology level: the nodes per value of the label `level`, by value.
std::map<std::string, std::vector<cluster::NodeIndex>> topology_domains(
    const cluster::Cluster& cluster, const std::string& level);

// Places every member or none; the cluster is changed only when placed. `resolver` must be the
// one the scheduler's requests come from (members are resolved with domain restrictions added).
GangDecision place_gang(cluster::Cluster& cluster, Scheduler& scheduler, RequestResolver& resolver,
                        const std::vector<workload::PodSpec>& members,
                        const std::vector<std::string>& topology_levels,
                        std::span<const std::uint32_t> tie_break_rank = {});

}  // namespace gpuorch::sched

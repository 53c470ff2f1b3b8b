#pragma once
// Kubernetes' node constraints on one node: cordon (NodeUnschedulable), nodeSelector and
// required node affinity (NodeAffinity), taints and tolerations (TaintToleration), with the
// semantics kube-scheduler's plugins give them, so a pod excluded there is excluded here.
#include "gpuorch/cluster/node_spec.hpp"
#include "gpuorch/workload/node_constraints.hpp"

namespace gpuorch::sched {

// The checks of the node-stage filters (sched/filters/node_unschedulable.hpp, node_affinity.hpp,
// taint_toleration.hpp); check_node_constraints (filter.hpp) runs them in the registry's order.
// A cordoned node passes only a pod that tolerates node.kubernetes.io/unschedulable.
bool tolerates_cordon(const cluster::NodeSpec& node, const workload::NodeConstraints& pod);
// nodeName (matchFields on metadata.name), nodeSelector, required node affinity.
bool matches_affinity(const cluster::NodeSpec& node, const workload::NodeConstraints& pod);
// Every NoSchedule/NoExecute taint of the node is tolerated.
bool tolerates_taints(const cluster::NodeSpec& node, const workload::NodeConstraints& pod);

// True when the node's taints or cordon can exclude a pod that states no constraint.
bool node_constrains(const cluster::NodeSpec& node);

bool matches(const cluster::NodeSpec& node, const workload::NodeSelectorTerm& term);
bool tolerates(const workload::Toleration& toleration, const cluster::Taint& taint);

}  // namespace gpuorch::sched

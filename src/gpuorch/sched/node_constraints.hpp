#pragma once
// Kubernetes' node constraints on one node: cordon (NodeUnschedulable), nodeSelector and
// required node affinity (NodeAffinity), taints and tolerations (TaintToleration), with the
// semantics kube-scheduler's plugins give them, so a pod excluded there is excluded here.
#include "gpuorch/cluster/node_spec.hpp"
#include "gpuorch/sched/reason.hpp"
#include "gpuorch/workload/node_constraints.hpp"

namespace gpuorch::sched {

// kFits, or the first of kUnschedulable, kNodeAffinity, kTaint that excludes the node.
Reason check_constraints(const cluster::NodeSpec& node, const workload::NodeConstraints& pod);

// True when the node's taints or cordon can exclude a pod that states no constraint.
bool node_constrains(const cluster::NodeSpec& node);

bool matches(const cluster::NodeSpec& node, const workload::NodeSelectorTerm& term);
bool tolerates(const workload::Toleration& toleration, const cluster::Taint& taint);

}  // namespace gpuorch::sched

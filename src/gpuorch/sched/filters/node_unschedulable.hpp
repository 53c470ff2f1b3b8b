#pragma once
// A cordoned node takes only pods that tolerate the unschedulable taint (kube-scheduler's
// NodeUnschedulable).
#include "gpuorch/sched/framework/filter_plugin.hpp"
#include "gpuorch/sched/node_constraints.hpp"

namespace gpuorch::sched::filters {

inline constexpr FilterPlugin kNodeUnschedulable{
    .name = "unschedulable",
    .stage = FilterStage::kNode,
    .filter_node = tolerates_cordon,
    .phrase = [](const PodRequest&) -> std::string { return "are unschedulable (cordoned)"; },
    .fix = "uncordon the nodes (kubectl uncordon NODE)",
};

}  // namespace gpuorch::sched::filters

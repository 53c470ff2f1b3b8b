#pragma once
// NoSchedule and NoExecute taints the pod does not tolerate (kube-scheduler's TaintToleration).
#include "gpuorch/sched/framework/filter_plugin.hpp"
#include "gpuorch/sched/node_constraints.hpp"

namespace gpuorch::sched::filters {

inline constexpr FilterPlugin kTaintToleration{
    .name = "taint",
    .stage = FilterStage::kNode,
    .filter_node = tolerates_taints,
    .phrase = [](const PodRequest&) -> std::string {
      return "have a taint the pod does not tolerate";
    },
    .fix =
        "add a toleration for the nodes' taint, or remove the taint (kubectl taint node NODE "
        "KEY-)",
};

}  // namespace gpuorch::sched::filters

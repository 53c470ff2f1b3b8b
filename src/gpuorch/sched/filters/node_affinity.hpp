#pragma once
// nodeName, nodeSelector and required node affinity (kube-scheduler's NodeName and NodeAffinity).
#include "gpuorch/sched/framework/filter_plugin.hpp"
#include "gpuorch/sched/node_constraints.hpp"

namespace gpuorch::sched::filters {

inline constexpr FilterPlugin kNodeAffinity{
    .name = "node-affinity",
    .stage = FilterStage::kNode,
    .filter_node = matches_affinity,
    .phrase = [](const PodRequest&) -> std::string {
      return "do not match the pod's node selector or affinity";
    },
    .fix =
        "fix the pod's nodeSelector / node affinity, or label the nodes it should run on "
        "(kubectl label node)",
};

}  // namespace gpuorch::sched::filters

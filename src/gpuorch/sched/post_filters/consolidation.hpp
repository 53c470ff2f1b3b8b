#pragma once
// Consolidation as a post-filter: a waiting pod gets a node by moving a few bound pods
// (sched/consolidation.hpp). An infeasible pod fits no node even when empty, so moving cannot
// help it and the next post-filter runs.
#include <string_view>

#include "gpuorch/sched/consolidation.hpp"
#include "gpuorch/sched/framework/post_filter.hpp"

namespace gpuorch::sched {

class ConsolidationPostFilter final : public PostFilterPlugin {
 public:
  // The consolidator must outlive this post-filter; the caller keeps telling it what is bound.
  explicit ConsolidationPostFilter(Consolidator& consolidator) : consolidator_(&consolidator) {}

  [[nodiscard]] std::string_view name() const override { return "consolidation"; }
  // The pod's id is the consolidator's (a uint32 id of the caller's); victims are the moved pods,
  // each with where it went, and the pod is bound (placement).
  PostFilterResult post_filter(const PostFilterArgs& args) override;

 private:
  Consolidator* consolidator_;
};

}  // namespace gpuorch::sched

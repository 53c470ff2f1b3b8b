#include "gpuorch/sched/post_filters/consolidation.hpp"

#include <fmt/format.h>

#include <cassert>

namespace gpuorch::sched {

PostFilterResult ConsolidationPostFilter::post_filter(const PostFilterArgs& args) {
  PostFilterResult r;
  if (args.failure.outcome != Outcome::kWaiting) {
    r.message = "fits no node even when empty";
    return r;
  }
  // A gang needs every member to fit together; moving pods for one member at a time could
  // leave it half placed, so consolidation helps single pods only.
  if (args.count != 1) {
    r.message = "moves pods for single pods only";
    return r;
  }
  assert(args.id <= UINT32_MAX);
  auto plan = consolidator_->make_room(static_cast<std::uint32_t>(args.id), args.request);
  if (!plan) {
    r.message = "no node fits after moving the pods allowed";
    return r;
  }
  r.status = PostFilterStatus::kSuccess;
  r.reason = "consolidation";
  r.message = fmt::format("moved {} pod{}", plan->moves.size(), plan->moves.size() == 1 ? "" : "s");
  r.nominated_node = plan->placement.node;
  r.placements.push_back(std::move(plan->placement));
  r.victims.reserve(plan->moves.size());
  for (Move& m : plan->moves) {
    r.victims.push_back(Victim{.id = m.pod, .moved_to = std::move(m.to)});
  }
  return r;
}

}  // namespace gpuorch::sched

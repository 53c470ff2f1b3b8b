#pragma once
// The post-filters a driver runs, in order (a kube-scheduler profile's postFilter list): the
// first that makes room ends the step, as RunPostFilterPlugins does. Adding a post-filter is a
// class implementing PostFilterPlugin and one add() where the driver builds its registry.
#include <memory>
#include <string_view>
#include <vector>

#include "gpuorch/sched/framework/post_filter.hpp"

namespace gpuorch::sched {

class PostFilterRegistry {
 public:
  // Runs after those added before it. Throws std::invalid_argument on a taken name.
  void add(std::unique_ptr<PostFilterPlugin> plugin);

  [[nodiscard]] bool empty() const { return plugins_.empty(); }
  [[nodiscard]] std::vector<std::string_view> names() const;

  // The first successful result; when none succeeds, kUnschedulable with every plugin's message
  // ("consolidation: ...; reclaim: ...") and no reason.
  PostFilterResult run(const PostFilterArgs& args);

 private:
  std::vector<std::unique_ptr<PostFilterPlugin>> plugins_;
};

}  // namespace gpuorch::sched

#pragma once
// A job layer over a cluster, placing through the scheduler core (best-fit), and the jobs a test
// gives it: what the job layer's tests build.
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "gpuorch/sched/jobs/core_placer.hpp"
#include "gpuorch/sched/jobs/job_layer.hpp"
#include "gpuorch/sched/policy.hpp"

namespace gpuorch::test {

struct LayerWorld {
  LayerWorld(std::vector<workload::QueueSpec> queues, std::vector<cluster::NodeSpec> nodes)
      : tree(std::move(queues)), c(std::move(nodes)) {}

  sched::jobs::QueueTree tree;
  cluster::Cluster c;
  std::unique_ptr<sched::Policy> policy = sched::make_policy("best-fit", sched::PolicyContext{&c});
  sched::Scheduler scheduler{c, *policy};
  sched::RequestResolver resolver{c};
  sched::jobs::JobLayer layer{c, tree, sched::jobs::core_placer(c, scheduler, resolver)};
  std::deque<workload::JobSpec> specs;  // stable addresses: JobState points at them
  std::vector<sched::jobs::JobState> states;

  // `s` added as the next job, in its queue, ranked after every job before it.
  sched::jobs::JobState& add(workload::JobSpec s) {
    specs.push_back(std::move(s));
    sched::jobs::JobState st;
    st.spec = &specs.back();
    st.queue = *tree.find(specs.back().queue);
    st.rank = double(states.size());
    states.push_back(std::move(st));
    return states.back();
  }
};

}  // namespace gpuorch::test

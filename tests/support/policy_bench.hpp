#pragma once
// A small cluster with one policy and the scheduler core around it, for the policy tests.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuorch/base/rng.hpp"
#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/filter.hpp"
#include "gpuorch/sched/fragmentation.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "test_support.hpp"

namespace gpuorch::test {

struct PolicyBench {
  // `target`: the fragmentation measure's target workload; `history`: what the policy may know
  // of past pods (efd needs it), none when empty.
  PolicyBench(std::string_view policy_name, std::vector<cluster::NodeSpec> nodes,
              const workload::TargetWorkload& target = {}, std::uint64_t seed = 1,
              workload::TargetWorkload past = {}, sched::SchedulerOptions options = {})
      : cluster(std::move(nodes)),
        rng(seed),
        measure(target, cluster),
        history(std::move(past)),
        policy(sched::make_policy(policy_name, context())),
        scheduler(cluster, *policy, options),
        resolver(cluster) {}

  sched::PolicyContext context() {
    return {&cluster, &measure, &rng, history.classes.empty() ? nullptr : &history};
  }

  sched::PodRequest req(std::int64_t cpu, int gpus, std::int64_t milli,
                        std::vector<std::string> models = {}) {
    return resolver.resolve(pod("p", cpu, gpus, milli, 0, std::move(models)));
  }

  // The policy's score of every node, as the scheduler asks for it (feasible nodes only);
  // nullopt for a node the filters reject.
  std::vector<std::optional<std::int64_t>> scores(const sched::PodRequest& p) {
    std::vector<cluster::NodeIndex> feasible;
    for (cluster::NodeIndex n = 0; n < cluster.node_count(); ++n) {
      if (sched::check_node(cluster, n, p) == sched::kFits) feasible.push_back(n);
    }
    std::vector<std::int64_t> s(feasible.size(), -1);
    if (!feasible.empty()) policy->score(cluster, p, feasible, s);
    std::vector<std::optional<std::int64_t>> out(cluster.node_count());
    for (std::size_t i = 0; i < feasible.size(); ++i) out[feasible[i]] = s[i];
    return out;
  }

  void apply(cluster::NodeIndex n, std::int64_t cpu, std::int64_t milli, std::vector<int> gpus) {
    cluster.apply(placement(n, cpu, milli, std::move(gpus)));
  }

  cluster::Cluster cluster;
  base::Rng rng;
  sched::FragmentationMeasure measure;
  workload::TargetWorkload history;
  std::unique_ptr<sched::Policy> policy;
  sched::Scheduler scheduler;
  sched::RequestResolver resolver;
};

using Scores = std::vector<std::optional<std::int64_t>>;

}  // namespace gpuorch::test

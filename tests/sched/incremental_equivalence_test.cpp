// The scheduler core's incremental path (score index) must decide exactly as the full scan:
// same outcome, node, GPUs and explanation for every pod, for every policy, on random clusters
// (mixed models, CPU-only nodes, random and colliding tie-break ranks) and random workloads
// (shares, whole and multi-GPU, CPU-only, model constraints, impossible pods) with departures.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "gpuorch/base/rng.hpp"
#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/fragmentation.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "gpuorch/workload/target_workload.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

const std::vector<std::string> kModels{"A100", "H100", "T4", "V100M32"};

struct Config {
  int max_nodes = 40;
  int steps = 300;
  int catalogue = 16;   // distinct pod shapes per run (requests repeat, as in traces)
  double depart = 0.2;  // chance that a step releases a placed pod instead
  bool colliding_ranks = false;
  int node_types = 0;  // > 0: nodes drawn from this many specs, so many nodes share a state

  std::size_t index_budget = std::size_t{512} << 20;
};

std::vector<cluster::NodeSpec> random_nodes(base::Rng& rng, int count, int types = 0) {
  if (types > 0) {
    const auto kinds = random_nodes(rng, types);
    std::vector<cluster::NodeSpec> nodes;
    for (int i = 0; i < count; ++i) {
      nodes.push_back(kinds[rng.below(kinds.size())]);
      nodes.back().name = fmt::format("n{}", i);
    }
    return nodes;
  }
  std::vector<cluster::NodeSpec> nodes;
  for (int i = 0; i < count; ++i) {
    const int gpus = rng.below(10) == 0 ? 0 : std::array{1, 2, 4, 8, 8}[rng.below(5)];
    const auto cpu = static_cast<std::int64_t>(8000 * (1 + rng.below(16)));
    const auto memory = static_cast<std::int64_t>(32768 * (1 + rng.below(32)));
    nodes.push_back(test::gpu_node(fmt::format("n{}", i), cpu, gpus,
                                   kModels[rng.below(kModels.size())], memory));
  }
  return nodes;
}

workload::PodSpec random_pod(base::Rng& rng, int i) {
  const std::uint64_t kind = rng.below(100);
  int gpus = 0;
  std::int64_t milli = 0;
  if (kind < 15) {
    gpus = 0;  // CPU-only
  } else if (kind < 60) {
    gpus = 1;
    milli = static_cast<std::int64_t>(50 * (1 + rng.below(19)));  // a share: 50..950
  } else if (kind < 98) {
    gpus = std::array{1, 1, 2, 4, 8}[rng.below(5)];
    milli = 1000;
  } else {
    gpus = 16;  // more GPUs than any node has: infeasible
    milli = 1000;
  }
  // Small CPU requests are common, large ones possible.
  const auto cpu =
      static_cast<std::int64_t>(rng.below(4) == 0 ? 500 * rng.below(129) : 250 * rng.below(33));
  const auto memory = static_cast<std::int64_t>(rng.below(3) == 0 ? 0 : 1024 * rng.below(257));
  std::vector<std::string> models;
  if (gpus > 0 && rng.below(5) == 0) {
    for (const auto& m : kModels) {
      if (rng.below(2) == 0) models.push_back(m);
    }
    if (rng.below(10) == 0) models.emplace_back("NoSuchModel");
    if (models.empty()) models.push_back(kModels[rng.below(kModels.size())]);
  }
  return test::pod(fmt::format("p{}", i), cpu, gpus, milli, memory, std::move(models));
}

// One cluster with one policy instance and one scheduler; two of them run side by side.
struct Side {
  Side(const std::vector<cluster::NodeSpec>& nodes, const workload::TargetWorkload& target,
       const std::string& policy_name, std::uint64_t seed, const SchedulerOptions& options)
      : cluster(nodes), rng(seed), measure(target, cluster) {
    const PolicyContext context{&cluster, &measure, &rng, &target};
    policy = make_policy(policy_name, context);
    scheduler = std::make_unique<Scheduler>(cluster, *policy, options);
  }
  cluster::Cluster cluster;
  base::Rng rng;
  FragmentationMeasure measure;
  std::unique_ptr<Policy> policy;
  std::unique_ptr<Scheduler> scheduler;
};

std::vector<std::uint32_t> random_rank(base::Rng& rng, std::size_t n, bool colliding) {
  std::vector<std::uint32_t> rank(n);
  if (colliding) {
    // Equal ranks too: then the full scan keeps the lowest node index.
    for (auto& r : rank) r = static_cast<std::uint32_t>(rng.below(n / 3 + 1));
  } else {
    std::iota(rank.begin(), rank.end(), 0U);
    rng.shuffle(std::span<std::uint32_t>(rank));
  }
  return rank;
}

// Runs one random scenario through both paths; returns the number of pods placed.
int run_scenario(const std::string& policy_name, std::uint64_t seed, const Config& config) {
  base::Rng rng(seed * 7919 + 17);
  const int node_count =
      1 + static_cast<int>(rng.below(static_cast<std::uint64_t>(config.max_nodes)));
  const auto nodes = random_nodes(rng, node_count, config.node_types);
  std::vector<workload::PodSpec> catalogue;
  for (int i = 0; i < config.catalogue; ++i) catalogue.push_back(random_pod(rng, i));
  const workload::TargetWorkload target = workload::typical_pods(catalogue);

  SchedulerOptions incremental_options;
  incremental_options.index_budget_bytes = config.index_budget;
  SchedulerOptions full_options;
  full_options.incremental = false;
  Side inc(nodes, target, policy_name, seed, incremental_options);
  Side full(nodes, target, policy_name, seed, full_options);
  RequestResolver resolver(inc.cluster);  // same nodes: requests resolve alike for both

  if (rng.below(4) != 0) {
    const auto rank = random_rank(rng, nodes.size(), config.colliding_ranks);
    inc.scheduler->set_tie_break_rank(rank);
    full.scheduler->set_tie_break_rank(rank);
  }

  std::vector<cluster::Placement> placed;
  int placed_count = 0;
  for (int step = 0; step < config.steps; ++step) {
    if (!placed.empty() && rng.below(1000) < static_cast<std::uint64_t>(config.depart * 1000)) {
      // A departure, applied to the clusters behind the schedulers' backs.
      const std::size_t k = rng.below(placed.size());
      inc.cluster.release(placed[k]);
      full.cluster.release(placed[k]);
      placed[k] = placed.back();
      placed.pop_back();
      continue;
    }
    if (step == config.steps / 2 && rng.below(2) == 0) {
      // A new ranking mid-run must invalidate the index.
      const auto rank = random_rank(rng, nodes.size(), config.colliding_ranks);
      inc.scheduler->set_tie_break_rank(rank);
      full.scheduler->set_tie_break_rank(rank);
    }
    const workload::PodSpec spec =
        rng.below(20) == 0 ? random_pod(rng, 1000 + step) : catalogue[rng.below(catalogue.size())];
    const PodRequest pod = resolver.resolve(spec);
    const Decision a = inc.scheduler->schedule(pod);
    const Decision b = full.scheduler->schedule(pod);
    const std::string where =
        fmt::format("policy {} seed {} step {} nodes {}", policy_name, seed, step, node_count);
    EXPECT_EQ(a.outcome, b.outcome) << where;
    if (a.outcome != b.outcome) return placed_count;
    if (a.outcome == Outcome::kPlaced) {
      EXPECT_EQ(a.placement.node, b.placement.node) << where;
      EXPECT_EQ(a.placement.gpus, b.placement.gpus) << where;
      EXPECT_EQ(a.placement.cpu_milli, b.placement.cpu_milli) << where;
      EXPECT_EQ(a.placement.memory_mib, b.placement.memory_mib) << where;
      EXPECT_EQ(a.placement.gpu_milli, b.placement.gpu_milli) << where;
      if (a.placement.node != b.placement.node || a.placement.gpus != b.placement.gpus) {
        return placed_count;
      }
      placed.push_back(a.placement);
      ++placed_count;
    } else {
      EXPECT_EQ(a.diagnosis.nodes_by_filter, b.diagnosis.nodes_by_filter) << where;
      EXPECT_EQ(a.diagnosis.nodes_checked, b.diagnosis.nodes_checked) << where;
      EXPECT_EQ(a.diagnosis.explain(pod), b.diagnosis.explain(pod)) << where;
    }
  }
  return placed_count;
}

using test::param_name;

class IncrementalEquivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(IncrementalEquivalence, SmallRandomClusters) {
  int placed = 0;
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    Config c;
    c.colliding_ranks = seed % 5 == 0;
    placed += run_scenario(GetParam(), seed, c);
    if (HasFailure()) return;
  }
  EXPECT_GT(placed, 1000);  // the scenarios place pods, not only fail them
}

TEST_P(IncrementalEquivalence, LargerClustersFewDepartures) {
  for (std::uint64_t seed = 100; seed < 106; ++seed) {
    Config c;
    c.max_nodes = 400;
    c.steps = 2500;
    c.catalogue = 40;
    c.depart = 0.05;
    run_scenario(GetParam(), seed, c);
    if (HasFailure()) return;
  }
}

TEST_P(IncrementalEquivalence, FewNodeTypesShareScoresByState) {
  // Many nodes in equal states: a whole-cluster pass scores each state once and copies it.
  for (std::uint64_t seed = 400; seed < 440; ++seed) {
    Config c;
    c.max_nodes = 150;
    c.steps = 600;
    c.node_types = 1 + static_cast<int>(seed % 4);
    c.depart = 0.3;
    c.colliding_ranks = seed % 3 == 0;
    run_scenario(GetParam(), seed, c);
    if (HasFailure()) return;
  }
}

TEST_P(IncrementalEquivalence, LongRunTrimsTheChangeJournal) {
  // A few nodes and many placements and departures: the cluster's journal (at least 4096
  // entries) is trimmed several times, so requests that fell behind it revalidate every node.
  Config c;
  c.max_nodes = 6;
  c.steps = 20000;
  c.catalogue = 30;
  c.depart = 0.45;
  run_scenario(GetParam(), 200, c);
}

TEST_P(IncrementalEquivalence, TinyIndexBudgetEvictsRequests) {
  // Room for one request only: every change of request rebuilds its slot from scratch.
  for (std::uint64_t seed = 300; seed < 310; ++seed) {
    Config c;
    c.index_budget = 1;
    run_scenario(GetParam(), seed, c);
    if (HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, IncrementalEquivalence, ::testing::ValuesIn(policy_names()),
                         param_name);

TEST(IncrementalEquivalence, StudyPoliciesScorePerNode) {
  // The five deterministic study policies take the incremental path (and score by node state);
  // random cannot.
  const cluster::Cluster cluster({test::gpu_node("n", 8000, 1)});
  const FragmentationMeasure measure({}, cluster);
  base::Rng rng(1);
  const PolicyContext context{&cluster, &measure, &rng};
  for (const char* name : {"dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd"}) {
    EXPECT_TRUE(make_policy(name, context)->scores_per_node()) << name;
    EXPECT_TRUE(make_policy(name, context)->scores_by_state()) << name;
  }
  EXPECT_FALSE(make_policy("random", context)->scores_per_node());
}

TEST(ClusterJournal, RecordsChangesAndForgetsOldOnes) {
  cluster::Cluster c({test::gpu_node("a", 64000, 4), test::gpu_node("b", 64000, 4)});
  EXPECT_EQ(c.journal_end(), 0U);  // construction is not a change
  const std::uint64_t start = c.journal_end();
  c.apply(test::placement(1, 1000, 500, {0}));
  c.release(test::placement(1, 1000, 500, {0}));
  c.apply(test::placement(0, 1000, 1000, {2}));
  const auto changes = c.changes_since(start);
  ASSERT_TRUE(changes.has_value());
  EXPECT_EQ(std::vector<cluster::NodeIndex>(changes->begin(), changes->end()),
            (std::vector<cluster::NodeIndex>{1, 1, 0}));
  EXPECT_TRUE(c.changes_since(c.journal_end())->empty());
  EXPECT_FALSE(c.changes_since(c.journal_end() + 1).has_value());
  for (int i = 0; i < 5000; ++i) {
    c.apply(test::placement(0, 1, 0, {}));
    c.release(test::placement(0, 1, 0, {}));
  }
  EXPECT_FALSE(c.changes_since(start).has_value());  // trimmed: the reader must revalidate
  EXPECT_LE(c.changes_since(c.journal_end() - 100)->size(), 100U);
}

}  // namespace
}  // namespace gpuorch::sched

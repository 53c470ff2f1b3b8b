// The filter registry: the built-in filters keep their keys and order, and a filter registered
// beyond them (as an out-of-tree kube-scheduler plugin is) is checked, counted, explained and
// keyed by everything that reads the registry, without an edit elsewhere.
#include "gpuorch/sched/framework/filter_registry.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "gpuorch/sched/filter.hpp"
#include "gpuorch/sched/framework/builtin_filters.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

using test::gpu_node;
using ::testing::ElementsAre;

std::vector<std::string_view> names() {
  std::vector<std::string_view> out;
  for (std::size_t i = 1; i <= filter_count(); ++i) {
    out.push_back(filter_name(FilterId(static_cast<std::uint8_t>(i))));
  }
  return out;
}

// A node whose name starts with "m-" is in maintenance: a test stand-in for a filter the core
// does not ship.
bool not_in_maintenance(const cluster::Cluster& cluster, cluster::NodeIndex n, const PodRequest&) {
  return !cluster.spec(n).name.starts_with("m-");
}
constexpr FilterPlugin kMaintenance{
    .name = "maintenance",
    .filter = not_in_maintenance,
    .filter_empty = not_in_maintenance,
    .phrase = [](const PodRequest&) -> std::string { return "are in maintenance"; },
    .fix = "wait for the maintenance to end",
};

// Node stage: only nodes labelled with a pool take pods, whatever the pod asks for.
bool in_a_pool(const cluster::NodeSpec& node, const workload::NodeConstraints&) {
  return std::any_of(node.labels.begin(), node.labels.end(),
                     [](const auto& label) { return label.first == "pool"; });
}
constexpr FilterPlugin kPool{
    .name = "pool",
    .stage = FilterStage::kNode,
    .filter_node = in_a_pool,
    .phrase = [](const PodRequest&) -> std::string { return "are in no pool"; },
    .fix = "label the node with its pool",
};

TEST(FilterRegistry, BuiltInFiltersKeepTheirKeysInTheirOrder) {
  EXPECT_THAT(names(),
              ElementsAre("unschedulable", "node-affinity", "taint", "no-gpu", "gpu-model",
                          "gpu-count", "gpu-milli", "gpu-groups", "cpu", "memory", "pods"));
  EXPECT_EQ(filter_name(kFits), "fits");
  EXPECT_EQ(filter_id("gpu-milli"), builtin_filter_id(filters::kGpuMilli));
  EXPECT_THROW((void)filter_id("maintenance"), std::out_of_range);
}

TEST(FilterRegistry, ARegisteredFilterIsCheckedCountedAndExplained) {
  const FilterRegistration maintenance(kMaintenance);
  EXPECT_EQ(filter_id("maintenance"), maintenance.id());
  EXPECT_EQ(names().back(), "maintenance");
  EXPECT_EQ(filter_plugin(maintenance.id()).fix, "wait for the maintenance to end");

  // Node 0 has GPUs but is in maintenance, node 1 has none.
  cluster::Cluster c{{gpu_node("m-t4", 16000, 4, "T4", 65536), gpu_node("cpu", 64000, 0)}};
  base::Rng rng(1);
  PolicyContext context;
  context.cluster = &c;
  context.rng = &rng;
  for (const bool incremental : {true, false}) {
    const auto policy = make_policy("best-fit", context);
    SchedulerOptions options;
    options.incremental = incremental;
    Scheduler scheduler(c, *policy, options);
    RequestResolver resolver(c);
    const PodRequest pod = resolver.resolve(test::pod("p", 1000, 1, 500));
    EXPECT_EQ(check_node(c, 0, pod), maintenance.id());
    EXPECT_EQ(check_empty_node(c, 0, pod), maintenance.id());

    const Decision d = scheduler.decide(pod);
    EXPECT_EQ(d.outcome, Outcome::kInfeasible);
    EXPECT_EQ(d.diagnosis.nodes(maintenance.id()), 1U);
    EXPECT_EQ(d.diagnosis.nodes(filter_id("no-gpu")), 1U);
    EXPECT_EQ(d.main_reason(), filter_id("no-gpu"));  // a tie goes to the earlier filter
    EXPECT_EQ(d.diagnosis.explain(pod), "2 nodes: 1 have no GPU, 1 are in maintenance");
    // A CPU pod still fits the node without GPUs.
    EXPECT_EQ(scheduler.decide(resolver.resolve(test::pod("c", 1000, 0, 0))).outcome,
              Outcome::kPlaced);
  }
}

TEST(FilterRegistry, ARegisteredNodeFilterIsPrecomputedForPodsWithoutConstraints) {
  cluster::NodeSpec pooled = gpu_node("a", 16000, 4, "T4", 65536);
  pooled.labels = {{"pool", "train"}};
  cluster::Cluster c{{pooled, gpu_node("b", 16000, 4, "T4", 65536)}};
  const FilterRegistration pool(kPool);
  RequestResolver resolver(c);
  const PodRequest pod = resolver.resolve(test::pod("p", 1000, 1, 1000));
  EXPECT_EQ(check_node(c, 0, pod), kFits);
  EXPECT_EQ(check_node(c, 1, pod), pool.id());
  EXPECT_EQ(check_empty_node(c, 1, pod), pool.id());
}

TEST(FilterRegistry, RefusesATakenNameAndAFilterWithoutItsCheck) {
  EXPECT_THROW(FilterRegistration{filters::kCpu}, std::invalid_argument);
  FilterPlugin no_check = kMaintenance;
  no_check.name = "no-check";
  no_check.filter = nullptr;
  EXPECT_THROW(FilterRegistration{no_check}, std::invalid_argument);
  EXPECT_EQ(filter_count(), kBuiltinFilters.size());
}

}  // namespace
}  // namespace gpuorch::sched

// Kubernetes node constraints in the scheduler core: kube-scheduler's semantics for cordons,
// nodeSelector, required node affinity (every operator) and taints/tolerations, through the
// filters, the explanation and the score index.
#include "gpuorch/sched/node_constraints.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

using workload::NodeSelectorRequirement;
using workload::NodeSelectorTerm;
using workload::SelectorOp;
using workload::Toleration;

cluster::NodeSpec labelled(std::string name, std::vector<std::pair<std::string, std::string>> l) {
  cluster::NodeSpec s = test::gpu_node(std::move(name), 16000, 4, "A100", 65536);
  s.labels = std::move(l);
  return s;
}

NodeSelectorTerm term(std::vector<NodeSelectorRequirement> r) { return {std::move(r), {}}; }

TEST(NodeConstraints, AffinityOperators) {
  const auto n = labelled("n1", {{"rack", "r1"}, {"gen", "5"}});
  auto check = [&](NodeSelectorRequirement r) {
    workload::NodeConstraints c;
    c.required_terms = {term({std::move(r)})};
    return check_node_constraints(n, c);
  };
  EXPECT_EQ(check({"rack", SelectorOp::kIn, {"r0", "r1"}}), kFits);
  EXPECT_EQ(check({"rack", SelectorOp::kIn, {"r0"}}), filter_id("node-affinity"));
  EXPECT_EQ(check({"zone", SelectorOp::kIn, {"r1"}}), filter_id("node-affinity"));
  EXPECT_EQ(check({"rack", SelectorOp::kNotIn, {"r0"}}), kFits);
  EXPECT_EQ(check({"rack", SelectorOp::kNotIn, {"r1"}}), filter_id("node-affinity"));
  EXPECT_EQ(check({"zone", SelectorOp::kNotIn, {"r1"}}), kFits);  // absent label
  EXPECT_EQ(check({"rack", SelectorOp::kExists, {}}), kFits);
  EXPECT_EQ(check({"zone", SelectorOp::kExists, {}}), filter_id("node-affinity"));
  EXPECT_EQ(check({"zone", SelectorOp::kDoesNotExist, {}}), kFits);
  EXPECT_EQ(check({"rack", SelectorOp::kDoesNotExist, {}}), filter_id("node-affinity"));
  EXPECT_EQ(check({"gen", SelectorOp::kGt, {"4"}}), kFits);
  EXPECT_EQ(check({"gen", SelectorOp::kGt, {"5"}}), filter_id("node-affinity"));
  EXPECT_EQ(check({"gen", SelectorOp::kLt, {"6"}}), kFits);
  EXPECT_EQ(check({"gen", SelectorOp::kLt, {"5"}}), filter_id("node-affinity"));
  EXPECT_EQ(check({"rack", SelectorOp::kGt, {"1"}}), filter_id("node-affinity"));  // not a number
  EXPECT_EQ(check({"gen", SelectorOp::kGt, {"1", "2"}}), filter_id("node-affinity"));
}

TEST(NodeConstraints, TermsAreOredExpressionsAnded) {
  const auto n = labelled("n1", {{"rack", "r1"}, {"gpu-type", "a100"}});
  workload::NodeConstraints c;
  c.required_terms = {
      term({{"rack", SelectorOp::kIn, {"r1"}}, {"gpu-type", SelectorOp::kIn, {"h100"}}})};
  EXPECT_EQ(check_node_constraints(n, c), filter_id("node-affinity"));
  c.required_terms.push_back(term({{"gpu-type", SelectorOp::kIn, {"a100"}}}));
  EXPECT_EQ(check_node_constraints(n, c), kFits);
  // An empty term selects nothing; matchFields knows the node's name.
  c.required_terms = {NodeSelectorTerm{}};
  EXPECT_EQ(check_node_constraints(n, c), filter_id("node-affinity"));
  c.required_terms = {NodeSelectorTerm{{}, {{"metadata.name", SelectorOp::kIn, {"n1"}}}}};
  EXPECT_EQ(check_node_constraints(n, c), kFits);
  c.required_terms = {NodeSelectorTerm{{}, {{"metadata.name", SelectorOp::kNotIn, {"n1"}}}}};
  EXPECT_EQ(check_node_constraints(n, c), filter_id("node-affinity"));
}

TEST(NodeConstraints, NodeSelectorNeedsEveryLabel) {
  const auto n = labelled("n1", {{"a", "1"}, {"b", "2"}});
  workload::NodeConstraints c;
  c.node_selector = {{"a", "1"}, {"b", "2"}};
  EXPECT_EQ(check_node_constraints(n, c), kFits);
  c.node_selector = {{"a", "1"}, {"b", "3"}};
  EXPECT_EQ(check_node_constraints(n, c), filter_id("node-affinity"));
}

TEST(NodeConstraints, TaintsTolerationsAndCordon) {
  auto n = labelled("n1", {});
  n.taints = {{"gpu", "true", "NoSchedule"}};
  workload::NodeConstraints c;
  EXPECT_EQ(check_node_constraints(n, c), filter_id("taint"));
  c.tolerations = {Toleration{"gpu", false, "false", ""}};
  EXPECT_EQ(check_node_constraints(n, c), filter_id("taint"));  // Equal, other value
  c.tolerations = {Toleration{"gpu", false, "true", "NoExecute"}};
  EXPECT_EQ(check_node_constraints(n, c), filter_id("taint"));  // other effect
  c.tolerations = {Toleration{"gpu", false, "true", "NoSchedule"}};
  EXPECT_EQ(check_node_constraints(n, c), kFits);
  c.tolerations = {Toleration{"gpu", true, "", ""}};
  EXPECT_EQ(check_node_constraints(n, c), kFits);
  c.tolerations = {Toleration{"", true, "", ""}};  // tolerates everything
  EXPECT_EQ(check_node_constraints(n, c), kFits);
  // PreferNoSchedule is a preference, not a filter.
  n.taints = {{"gpu", "true", "PreferNoSchedule"}};
  EXPECT_EQ(check_node_constraints(n, workload::NodeConstraints{}), kFits);
  EXPECT_FALSE(node_constrains(n));
  n.unschedulable = true;
  EXPECT_TRUE(node_constrains(n));
  EXPECT_EQ(check_node_constraints(n, workload::NodeConstraints{}), filter_id("unschedulable"));
  c.tolerations = {Toleration{"node.kubernetes.io/unschedulable", true, "", "NoSchedule"}};
  EXPECT_EQ(check_node_constraints(n, c), kFits);
}

// Through the core: constrained pods are filtered, explained and placed by the index exactly as
// by the full scan, and nodes that differ only in labels are not mixed up by the state memo.
TEST(NodeConstraints, SchedulerFiltersAndExplains) {
  std::vector<cluster::NodeSpec> nodes;
  for (int i = 0; i < 6; ++i) {
    nodes.push_back(labelled(fmt::format("n{}", i), {{"rack", i < 3 ? "r0" : "r1"}}));
  }
  nodes[5].taints = {{"dedicated", "x", "NoSchedule"}};
  nodes[4].unschedulable = true;
  for (const bool incremental : {true, false}) {
    cluster::Cluster c(nodes);
    const auto policy = make_policy("best-fit", PolicyContext{&c});
    SchedulerOptions options;
    options.incremental = incremental;
    Scheduler s(c, *policy, options);
    RequestResolver resolver(c);
    workload::PodSpec p = test::pod("p", 1000, 4, 1000, 0);
    p.constraints.required_terms = {term({{"rack", SelectorOp::kIn, {"r1"}}})};
    const PodRequest r = resolver.resolve(p);
    ASSERT_NE(r.constraint, 0U);
    Decision d = s.schedule(r);
    ASSERT_EQ(d.outcome, Outcome::kPlaced);
    EXPECT_EQ(d.placement.node, 3U);  // n4 cordoned, n5 tainted
    d = s.schedule(r);
    // Only n3 may take it and n3 is full: waiting, explained per reason.
    ASSERT_EQ(d.outcome, Outcome::kWaiting);
    const auto& by = d.diagnosis.nodes_by_filter;
    EXPECT_EQ(by[filter_index(filter_id("node-affinity"))], 3U);
    EXPECT_EQ(by[filter_index(filter_id("unschedulable"))], 1U);
    EXPECT_EQ(by[filter_index(filter_id("taint"))], 1U);
    EXPECT_EQ(by[filter_index(filter_id("gpu-count"))], 1U);
    EXPECT_NE(d.diagnosis.explain(r).find("3 do not match the pod's node selector or affinity"),
              std::string::npos);
    // A pod that states nothing still keeps off the cordoned and the tainted node.
    const PodRequest plain = resolver.resolve(test::pod("q", 1000, 4, 1000, 0));
    for (int k = 0; k < 3; ++k) {
      d = s.schedule(plain);
      ASSERT_EQ(d.outcome, Outcome::kPlaced);
      EXPECT_LT(d.placement.node, 3U);
    }
    EXPECT_EQ(s.schedule(plain).outcome, Outcome::kWaiting);
  }
}

TEST(NodeConstraints, PodsPerNode) {
  std::vector<cluster::NodeSpec> nodes{test::gpu_node("a", 64000, 0),
                                       test::gpu_node("b", 64000, 0)};
  nodes[0].max_pods = 2;
  nodes[1].max_pods = -1;  // advertises no pods at all
  cluster::Cluster c(nodes);
  const auto policy = make_policy("best-fit", PolicyContext{&c});
  Scheduler s(c, *policy);
  RequestResolver resolver(c);
  const PodRequest r = resolver.resolve(test::pod("p", 100, 0, 0));
  EXPECT_EQ(s.schedule(r).placement.node, 0U);
  EXPECT_EQ(s.schedule(r).placement.node, 0U);
  const Decision d = s.schedule(r);
  EXPECT_EQ(d.outcome, Outcome::kWaiting);
  EXPECT_EQ(d.diagnosis.nodes_by_filter[filter_index(filter_id("pods"))], 2U);
}

}  // namespace
}  // namespace gpuorch::sched

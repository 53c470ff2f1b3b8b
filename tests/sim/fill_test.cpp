#include "gpuorch/sim/fill.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "gpuorch/cluster/cluster.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sim/arrivals.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sim {
namespace {

FillOptions tuned(double tune) {
  FillOptions o;
  o.tune = tune;
  return o;
}

using test::param_name;

using test::gpu_node;
using test::pod;

// 7 nodes, 38 GPUs, and 40 pods of the trace's common shapes (names out of order on purpose),
// plus one pod no node can ever hold. GPU demand 38880 milli: below the 130 % target (49400).
FillInput small_input() {
  std::vector<cluster::NodeSpec> nodes{gpu_node("n0", 96000, 8),
                                       gpu_node("n1", 96000, 8),
                                       gpu_node("n2", 104000, 2, "T4"),
                                       gpu_node("n3", 104000, 2, "T4"),
                                       gpu_node("n4", 32000, 4, "V100M16"),
                                       gpu_node("n5", 128000, 6, "G3"),
                                       gpu_node("n6", 96000, 8)};
  std::vector<workload::PodSpec> pods;
  for (int i = 39; i >= 0; --i) {
    const std::string name = fmt::format("pod-{:03}", i);
    switch (i % 6) {
      case 0:
        pods.push_back(pod(name, 3152, 1, 810, 5600));
        break;
      case 1:
        pods.push_back(pod(name, 11300, 1, 1000, 49152));
        break;
      case 2:
        pods.push_back(pod(name, 12500, 0, 0, 57344));
        break;
      case 3:
        pods.push_back(pod(name, 8000, 1, 470, 30517, {"T4"}));
        break;
      case 4:
        pods.push_back(pod(name, 16000, 2, 1000, 65536));
        break;
      default:
        pods.push_back(pod(name, 4000, 1, 320, 22888));
        break;
    }
  }
  pods.push_back(pod("pod-huge", 1000, 9, 1000));
  return make_fill_input("small", std::move(nodes), std::move(pods));
}

TEST(MakeFillInput, SortsPodsByNameAndDerivesTheTarget) {
  const FillInput in = small_input();
  EXPECT_EQ(in.label, "small");
  EXPECT_EQ(in.nodes.size(), 7U);
  ASSERT_EQ(in.pods.size(), 41U);
  EXPECT_TRUE(std::is_sorted(in.pods.begin(), in.pods.end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
  EXPECT_EQ(in.pods.front().name, "pod-000");
  const auto expected = workload::typical_pods(in.pods);
  ASSERT_EQ(in.target.classes.size(), expected.classes.size());
  EXPECT_EQ(in.target.classes[0].count, expected.classes[0].count);
}

class FillPolicies : public ::testing::TestWithParam<std::string> {};

TEST_P(FillPolicies, RunInvariants) {
  const FillInput in = small_input();
  const FillRun r = run_fill(in, GetParam(), 42, tuned(1.3));
  EXPECT_EQ(r.policy, GetParam());
  EXPECT_EQ(r.seed, 42U);
  EXPECT_EQ(r.gpu_milli_capacity, 38000);
  // The arrivals are the tuned sequence of this seed.
  base::Rng rng(42);
  const auto arrivals = tuned_arrivals(in.pods, 1.3, 38000, rng);
  EXPECT_GT(arrivals.size(), in.pods.size());
  EXPECT_EQ(r.arrived_pods, arrivals.size());
  std::int64_t arrived = 0;
  for (const auto i : arrivals) arrived += in.pods[i].total_gpu_milli();
  EXPECT_EQ(r.arrived_gpu_milli, arrived);
  EXPECT_GT(r.used_gpu_milli, 0);
  EXPECT_LE(r.used_gpu_milli, r.gpu_milli_capacity);
  EXPECT_GT(r.failed_pods, 0U);
  EXPECT_LE(r.failed_pods, r.arrived_pods);
  EXPECT_GE(r.infeasible_pods, 1U);  // pod-huge, every time it arrives
  EXPECT_LE(r.infeasible_pods, r.failed_pods);
  EXPECT_EQ(std::accumulate(r.failed_by_reason.begin(), r.failed_by_reason.end(), 0U),
            r.failed_pods);
  EXPECT_EQ(r.failed_by_reason[0], 0U);  // "fits" is never a failure reason
  // By kind: every failed pod once, and their GPU demand is exactly what arrived and is not used.
  std::size_t by_kind = 0;
  std::int64_t failed_milli = 0;
  for (const auto& [kind, t] : r.failed_by_kind) {
    EXPECT_GE(kind, -1);
    EXPECT_GT(t.pods, 0U);
    by_kind += t.pods;
    failed_milli += t.gpu_milli;
  }
  EXPECT_EQ(by_kind, r.failed_pods);
  EXPECT_EQ(failed_milli, r.arrived_gpu_milli - r.used_gpu_milli);
  // Nothing departs: allocation never goes down along the curve.
  std::optional<double> last;
  int points = 0;
  for (std::size_t x = 0; x < r.curves.alloc.size(); ++x) {
    const auto& v = r.curves.alloc[x];
    if (!v) continue;
    ++points;
    if (last) {
      EXPECT_GE(*v, *last) << "x = " << x;
    }
    last = v;
    EXPECT_GE(*r.curves.frag_ratio[x], 0.0);
    EXPECT_LE(*r.curves.frag_ratio[x], 100.0 + 1e-9);
    EXPECT_GE(*r.curves.frag_amount[x], 0.0);
  }
  EXPECT_GT(points, 20);
  EXPECT_LE(*last, 100.0 * static_cast<double>(r.used_gpu_milli) / 38000.0 + 0.01);
  // Same seed, same run.
  const FillRun again = run_fill(in, GetParam(), 42, tuned(1.3));
  EXPECT_EQ(again.curves.alloc, r.curves.alloc);
  EXPECT_EQ(again.curves.frag_amount, r.curves.frag_amount);
  EXPECT_EQ(again.failed_pods, r.failed_pods);
}

INSTANTIATE_TEST_SUITE_P(StudyPolicies, FillPolicies,
                         ::testing::Values("random", "dot-product", "gpu-clustering", "gpu-packing",
                                           "best-fit", "fgd"),
                         param_name);

TEST(RunFillGrid, PolicyMajorOrderAndSameResultWithAnyThreadCount) {
  const FillInput in = small_input();
  const std::vector<std::string> policies{"fgd", "random", "best-fit"};
  const std::vector<std::uint64_t> seeds{1, 2, 3};
  std::vector<std::size_t> progress;
  const auto one = run_fill_grid(in, policies, seeds, FillOptions{}, 1,
                                 [&](std::size_t done, std::size_t total) {
                                   EXPECT_EQ(total, 9U);
                                   progress.push_back(done);
                                 });
  const auto two = run_fill_grid(in, policies, seeds, FillOptions{}, 2, {});
  EXPECT_EQ(progress, (std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  ASSERT_EQ(one.size(), 9U);
  ASSERT_EQ(two.size(), 9U);
  for (std::size_t k = 0; k < 9; ++k) {
    EXPECT_EQ(one[k].policy, policies[k / 3]);
    EXPECT_EQ(one[k].seed, seeds[k % 3]);
    EXPECT_EQ(two[k].policy, one[k].policy);
    EXPECT_EQ(two[k].seed, one[k].seed);
    EXPECT_EQ(two[k].curves.alloc, one[k].curves.alloc);
    EXPECT_EQ(two[k].curves.frag_ratio, one[k].curves.frag_ratio);
    EXPECT_EQ(two[k].arrived_pods, one[k].arrived_pods);
    EXPECT_EQ(two[k].failed_pods, one[k].failed_pods);
  }
  EXPECT_NE(one[0].curves.alloc, one[1].curves.alloc);  // seeds matter
}

TEST(RunFillGrid, UnknownPolicyIsAnInputError) {
  const FillInput in = small_input();
  EXPECT_THAT(test::input_error([&] {
                run_fill_grid(in, {"fgd", "nope"}, {1}, FillOptions{}, 2, {});
              }),
              ::testing::StartsWith("unknown policy 'nope'"));
}

TEST(RunFill, CountsSingleGpuPodsThatFailWithGpuRoom) {
  // One 4-GPU node with 3 cores; every pod asks for one GPU. 2-core pods: one fits, then the
  // node's CPU stops the rest while 3 GPUs stay free. 1-core pods: 3 fit; the GPUs run out first.
  FillInput cpu_bound = make_fill_input("cpu", {gpu_node("n", 3000, 4)},
                                        {pod("a", 2000, 1, 1000), pod("b", 2000, 1, 500)});
  const FillRun starved = run_fill(cpu_bound, "best-fit", 1, tuned(1.3));
  EXPECT_EQ(starved.arrived_pods - starved.failed_pods, 1U);
  EXPECT_GT(starved.failed_pods, 0U);
  EXPECT_EQ(starved.failed_with_free_gpu, starved.failed_pods);
  EXPECT_EQ(starved.failed_with_gpu_room, starved.failed_pods);

  FillInput gpu_bound = make_fill_input("gpu", {gpu_node("n", 64000, 4)},
                                        {pod("a", 1000, 1, 1000), pod("b", 1000, 1, 1000)});
  const FillRun full = run_fill(gpu_bound, "best-fit", 1, tuned(1.3));
  EXPECT_GT(full.failed_pods, 0U);
  EXPECT_EQ(full.failed_with_free_gpu, 0U);
  EXPECT_EQ(full.failed_with_gpu_room, 0U);

  // One GPU, 2000 CPU, three 1000-CPU shares (400, 400, 100 milli; tuned to exactly their
  // demand): whichever two come first use all the CPU, and the third fails with room left on the
  // GPU but none of it entirely free.
  FillInput cpu_left =
      make_fill_input("cpu-left", {gpu_node("n", 2000, 1)},
                      {pod("a", 1000, 1, 400), pod("b", 1000, 1, 400), pod("c", 1000, 1, 100)});
  const FillRun room = run_fill(cpu_left, "best-fit", 1, tuned(0.9));
  EXPECT_EQ(room.failed_pods, 1U);
  EXPECT_EQ(room.failed_with_gpu_room, 1U);
  EXPECT_EQ(room.failed_with_free_gpu, 0U);
  // Two 600-milli shares on one GPU: the second fails for GPU space.
  FillInput space = make_fill_input("space", {gpu_node("n", 64000, 1)},
                                    {pod("a", 1000, 1, 600), pod("b", 1000, 1, 600)});
  const FillRun no_room = run_fill(space, "best-fit", 1, tuned(1.2));
  EXPECT_EQ(no_room.failed_pods, 1U);
  EXPECT_EQ(no_room.failed_with_gpu_room, 0U);
}

TEST(RunFill, TuneScalesTheArrivedDemand) {
  const FillInput in = small_input();
  const FillRun low = run_fill(in, "best-fit", 5, tuned(0.5));
  const FillRun high = run_fill(in, "best-fit", 5, tuned(1.3));
  EXPECT_LE(low.arrived_gpu_milli, 19000);          // removal: 0.5 x 38000
  EXPECT_GT(high.arrived_gpu_milli, 49400 - 1000);  // clones: 1.3 x 38000
  EXPECT_LT(low.arrived_pods, high.arrived_pods);
}

}  // namespace
}  // namespace gpuorch::sim

// The GPU picker (sched/gpu_picker.hpp): the best-connected free GPUs of a node, the rule of
// docs/device-plugin.md, and through Scheduler::schedule for the topology-aware policies.
#include "gpuorch/sched/gpu_picker.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "gpuorch/sched/policy.hpp"
#include "gpuorch/sched/scheduler.hpp"
#include "gpuorch/workload/target_workload.hpp"
#include "support/policy_bench.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched {
namespace {

using ::testing::ElementsAre;

using Links = std::vector<std::uint8_t>;

// `n` GPUs; GPUs of one island pair at `inside`, others at `outside`.
Links islands(int n, const std::vector<int>& island_of, std::uint8_t inside, std::uint8_t outside) {
  Links m(static_cast<std::size_t>(n * n), 0);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      m[static_cast<std::size_t>(a * n + b)] =
          island_of[static_cast<std::size_t>(a)] == island_of[static_cast<std::size_t>(b)]
              ? inside
              : outside;
    }
  }
  return m;
}

// DGX-1-like: two NVLink islands of four (0-3, 4-7), SYS between them (topology/link_scores.hpp:
// NV18 on one NUMA node 137, SYS across 10).
Links dgx() { return islands(8, {0, 0, 0, 0, 1, 1, 1, 1}, 137, 10); }

// PCIe only: one NUMA node per four GPUs, pairs (0,1) (2,3) (4,5) (6,7) under one switch (PIX),
// the other pairs of a NUMA node through the host bridges (NODE), SYS across.
Links pcie_only() {
  Links m(64, 0);
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      std::uint8_t v = 10;
      if (a / 4 == b / 4) v = a / 2 == b / 2 ? 51 : 21;  // PIX, NODE, both on one NUMA node
      m[static_cast<std::size_t>(a * 8 + b)] = v;
    }
  }
  return m;
}

std::vector<std::int32_t> free_except(int n, const std::vector<int>& busy) {
  std::vector<std::int32_t> left(static_cast<std::size_t>(n), 1000);
  for (const int g : busy) left[static_cast<std::size_t>(g)] = 500;
  return left;
}

TEST(GpuPicker, DgxPicksInsideAnIslandAndKeepsTheOtherWhole) {
  const auto all = free_except(8, {});
  EXPECT_THAT(pick_gpus(all, 2, dgx()), ElementsAre(0, 1));
  EXPECT_THAT(pick_gpus(all, 4, dgx()), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(pick_gpus(all, 8, dgx()), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
}

TEST(GpuPicker, DgxWithBusyGpus) {
  // GPU 1 busy: a pair from the broken island (0, 2, 3), so 4-7 stay whole for a 4-GPU pod.
  EXPECT_THAT(pick_gpus(free_except(8, {1}), 2, dgx()), ElementsAre(0, 2));
  EXPECT_THAT(pick_gpus(free_except(8, {1}), 4, dgx()), ElementsAre(4, 5, 6, 7));
  // A single GPU from the broken island too: GPU 5 busy leaves 0-3 whole, the pick is 4.
  EXPECT_THAT(pick_gpus(free_except(8, {5}), 1, dgx()), ElementsAre(4));
  // No island whole: three from one, one from the other (weakest pair 10 either way, the sum
  // decides), then the lowest indices.
  EXPECT_THAT(pick_gpus(free_except(8, {1, 5}), 4, dgx()), ElementsAre(0, 2, 3, 4));
  // Fewer free GPUs than asked: all of them, as lowest_free_gpus.
  EXPECT_THAT(pick_gpus(free_except(8, {0, 1, 2, 3, 4}), 4, dgx()), ElementsAre(5, 6, 7));
}

TEST(GpuPicker, PcieOnlyPicksUnderOneSwitchThenOneNumaNode) {
  const auto all = free_except(8, {});
  EXPECT_THAT(pick_gpus(all, 2, pcie_only()), ElementsAre(0, 1));
  EXPECT_THAT(pick_gpus(all, 4, pcie_only()), ElementsAre(0, 1, 2, 3));
  // GPU 0 busy: 2 takes the other switch of NUMA 0 (2, 3) and leaves 1 alone; 4 the other node.
  EXPECT_THAT(pick_gpus(free_except(8, {0}), 2, pcie_only()), ElementsAre(2, 3));
  EXPECT_THAT(pick_gpus(free_except(8, {0}), 4, pcie_only()), ElementsAre(4, 5, 6, 7));
  // A single GPU: the one whose switch partner is busy.
  EXPECT_THAT(pick_gpus(free_except(8, {0}), 1, pcie_only()), ElementsAre(1));
}

TEST(GpuPicker, InterleavedIslands) {
  // Islands {0, 2, 4, 6} and {1, 3, 5, 7}: lowest indices would span both.
  const Links m = islands(8, {0, 1, 0, 1, 0, 1, 0, 1}, 137, 10);
  EXPECT_THAT(pick_gpus(free_except(8, {}), 4, m), ElementsAre(0, 2, 4, 6));
  EXPECT_THAT(pick_gpus(free_except(8, {}), 2, m), ElementsAre(0, 2));
  EXPECT_THAT(pick_gpus(free_except(8, {0}), 4, m), ElementsAre(1, 3, 5, 7));
}

// The same-NUMA bit only breaks ties: sets {0, 1, 2, 3} and {0, 1, 2, 4} share their weakest
// pair (NV1 across NUMA nodes, 102); GPU 3 joins 0-2 by NV1 on their NUMA node (103 each: one
// more NUMA bit per pair), GPU 4 by one NV2 and two NV1 across (104, 102, 102: one more NVLink).
// Summed as plain numbers the three NUMA bits would win (3 x 103 = 309 > 104 + 2 x 102 = 308);
// summed by link class first, the NVLink wins.
TEST(GpuPicker, NumaBitsNeverOutweighALink) {
  Links m(25, 10);
  auto set = [&](int a, int b, std::uint8_t v) {
    m[static_cast<std::size_t>(a * 5 + b)] = v;
    m[static_cast<std::size_t>(b * 5 + a)] = v;
  };
  for (int g = 0; g < 5; ++g) set(g, g, 0);
  set(0, 1, 102);
  set(0, 2, 102);
  set(1, 2, 102);
  for (int g = 0; g < 3; ++g) set(g, 3, 103);
  set(0, 4, 104);
  set(1, 4, 102);
  set(2, 4, 102);
  EXPECT_THAT(pick_gpus(free_except(5, {}), 4, m), ElementsAre(0, 1, 2, 4));
  // With GPU 4's NV2 cut to NV1 across (102), the NUMA bits decide: GPU 3.
  set(0, 4, 102);
  EXPECT_THAT(pick_gpus(free_except(5, {}), 4, m), ElementsAre(0, 1, 2, 3));
}

TEST(GpuPicker, EmptyOrUniformMatrixIsLowestFreeGpus) {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(gen() % 16);
    std::vector<std::int32_t> left(static_cast<std::size_t>(n));
    for (auto& l : left) l = gen() % 3 == 0 ? static_cast<std::int32_t>(gen() % 1000) : 1000;
    const int k = static_cast<int>(gen() % static_cast<unsigned>(n + 2));
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " n " << n << " k " << k);
    EXPECT_EQ(pick_gpus(left, k, {}), lowest_free_gpus(left, k));
    Links uniform(static_cast<std::size_t>(n * n), 0);
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        if (a != b) uniform[static_cast<std::size_t>(a * n + b)] = 40;
      }
    }
    EXPECT_EQ(pick_gpus(left, k, uniform), lowest_free_gpus(left, k));
  }
}

// The rule's key of a set: (weakest pair, sum) maximised, leak to the free GPUs left minimised;
// sums and leaks by link class (strength / 2) first, then by same-NUMA bits (strength % 2).
using SetKey = std::tuple<long long, long long, long long, long long, long long>;
SetKey key_of(const std::vector<int>& set, const std::vector<int>& free, const Links& m, int n) {
  long long weakest = std::numeric_limits<long long>::max(), sum = 0, sum_numa = 0, leak = 0,
            leak_numa = 0;
  auto at = [&](int a, int b) {
    return static_cast<long long>(m[static_cast<std::size_t>(a * n + b)]);
  };
  for (std::size_t i = 0; i < set.size(); ++i) {
    for (std::size_t j = i + 1; j < set.size(); ++j) {
      weakest = std::min(weakest, at(set[i], set[j]));
      sum += at(set[i], set[j]) / 2;
      sum_numa += at(set[i], set[j]) % 2;
    }
  }
  for (const int a : set) {
    for (const int f : free) {
      if (std::find(set.begin(), set.end(), f) != set.end()) continue;
      leak += at(a, f) / 2;
      leak_numa += at(a, f) % 2;
    }
  }
  return {weakest, sum, sum_numa, -leak, -leak_numa};
}

TEST(GpuPicker, ExactSearchMatchesBruteForce) {
  std::mt19937 gen(42);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = 2 + static_cast<int>(gen() % 9);  // 2..10 GPUs
    Links m(static_cast<std::size_t>(n * n), 0);
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        // Few distinct values, so ties happen and the tie-breaks (NUMA bits too) are exercised.
        const auto v = static_cast<std::uint8_t>(10 * (1 + gen() % 4) + gen() % 2);
        m[static_cast<std::size_t>(a * n + b)] = v;
        m[static_cast<std::size_t>(b * n + a)] = v;
      }
    }
    std::vector<std::int32_t> left(static_cast<std::size_t>(n), 1000);
    std::vector<int> free;
    for (int g = 0; g < n; ++g) {
      if (gen() % 4 == 0) left[static_cast<std::size_t>(g)] = 0;
      if (left[static_cast<std::size_t>(g)] == 1000) free.push_back(g);
    }
    const int k = 1 + static_cast<int>(gen() % static_cast<unsigned>(n));
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " n " << n << " k " << k);
    const auto got = pick_gpus(left, k, m);
    if (static_cast<int>(free.size()) <= k) {
      EXPECT_EQ(got, free);
      continue;
    }
    // Every k-subset of the free GPUs, in lexicographic order: the first with the best key.
    std::vector<int> best;
    SetKey best_key{};
    std::vector<bool> mask(free.size(), false);
    std::fill(mask.begin(), mask.begin() + k, true);
    do {
      std::vector<int> set;
      for (std::size_t i = 0; i < free.size(); ++i) {
        if (mask[i]) set.push_back(free[i]);
      }
      const auto key = key_of(set, free, m, n);
      if (best.empty() || key > best_key) {
        best = set;
        best_key = key;
      }
    } while (std::prev_permutation(mask.begin(), mask.end()));
    EXPECT_EQ(key_of(got, free, m, n), best_key);
    EXPECT_EQ(got, best);
  }
}

TEST(GpuPicker, GreedyBeyondTheExactLimitKeepsIslandsAndIsDeterministic) {
  // 32 GPUs in four NVLink islands of eight; C(30, 4) = 27405 sets is past the exact limit.
  std::vector<int> island_of(32);
  for (int g = 0; g < 32; ++g) island_of[static_cast<std::size_t>(g)] = g / 8;
  const Links m = islands(32, island_of, 137, 10);
  const auto left = free_except(32, {0, 1});
  const auto four = pick_gpus(left, 4, m);
  EXPECT_THAT(four, ElementsAre(2, 3, 4, 5));  // the broken island, lowest first
  EXPECT_EQ(pick_gpus(left, 4, m), four);
  const auto eight = pick_gpus(free_except(32, {0}), 8, m);  // C(31, 8): greedy
  EXPECT_THAT(eight, ElementsAre(8, 9, 10, 11, 12, 13, 14, 15));
}

TEST(GpuPicker, FixedMembersAndBadInput) {
  const Links d = dgx();
  const std::vector<int> links(d.begin(), d.end());
  const std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  // GPU 5 required: its partner comes from its own island.
  EXPECT_THAT(pick_connected(8, links, all, std::vector<int>{5}, 2), ElementsAre(4, 5));
  // A fixed member that is not a candidate still counts for the pairs.
  EXPECT_THAT(pick_connected(8, links, std::vector<int>{0, 1, 6, 7}, std::vector<int>{5}, 3),
              ElementsAre(5, 6, 7));
  EXPECT_THAT(pick_connected(8, links, all, std::vector<int>{2, 6}, 2), ElementsAre(2, 6));
  EXPECT_THROW(pick_gpus(free_except(8, {}), 2, Links(10, 0)), std::invalid_argument);
  EXPECT_THROW(pick_connected(8, links, std::vector<int>{9}, {}, 1), std::invalid_argument);
}

// Through the scheduler core: efd (and efd-online) take the picker's GPUs on a node with a
// link matrix; the study's policies keep the lowest-index free GPUs.
cluster::NodeSpec dgx_node(Links links) {
  cluster::NodeSpec n = test::gpu_node("dgx", 64000, 8);
  n.gpu_links = std::move(links);
  return n;
}

workload::TargetWorkload four_gpu_history() {
  const std::vector<workload::PodSpec> past(4, test::pod("h", 1000, 4, 1000));
  return workload::typical_pods(past, 1.0);
}

TEST(GpuPickerInScheduler, EfdPlacesAFourGpuPodInsideOneIsland) {
  for (const char* name : {"efd", "efd-online"}) {
    SCOPED_TRACE(name);
    test::PolicyBench b(name, {dgx_node(dgx())}, {}, 1, four_gpu_history());
    EXPECT_TRUE(b.policy->topology_aware_gpus());
    b.apply(0, 1000, 1000, {1});  // island 0-3 is broken
    const auto d = b.scheduler.schedule(b.req(1000, 4, 1000));
    ASSERT_EQ(d.outcome, Outcome::kPlaced);
    EXPECT_THAT(d.placement.gpus, ElementsAre(4, 5, 6, 7));
  }
  // Interleaved islands, all free.
  test::PolicyBench b("efd", {dgx_node(islands(8, {0, 1, 0, 1, 0, 1, 0, 1}, 137, 10))}, {}, 1,
                      four_gpu_history());
  const auto first = b.scheduler.schedule(b.req(1000, 4, 1000));
  ASSERT_EQ(first.outcome, Outcome::kPlaced);
  EXPECT_THAT(first.placement.gpus, ElementsAre(0, 2, 4, 6));
  const auto second = b.scheduler.schedule(b.req(1000, 4, 1000));
  ASSERT_EQ(second.outcome, Outcome::kPlaced);
  EXPECT_THAT(second.placement.gpus, ElementsAre(1, 3, 5, 7));
}

TEST(GpuPickerInScheduler, StudyPoliciesKeepTheirOwnGpuChoice) {
  for (const char* name :
       {"random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd"}) {
    SCOPED_TRACE(name);
    test::PolicyBench b(name, {dgx_node(dgx())}, four_gpu_history());
    EXPECT_FALSE(b.policy->topology_aware_gpus());
    b.apply(0, 1000, 1000, {1});
    const auto d = b.scheduler.schedule(b.req(1000, 4, 1000));
    ASSERT_EQ(d.outcome, Outcome::kPlaced);
    EXPECT_THAT(d.placement.gpus, ElementsAre(0, 2, 3, 4));
  }
}

TEST(GpuPickerInScheduler, EfdWithoutAMatrixTakesTheLowestFreeGpus) {
  test::PolicyBench b("efd", {test::gpu_node("plain", 64000, 8)}, {}, 1, four_gpu_history());
  b.apply(0, 1000, 1000, {1});
  const auto d = b.scheduler.schedule(b.req(1000, 4, 1000));
  ASSERT_EQ(d.outcome, Outcome::kPlaced);
  EXPECT_THAT(d.placement.gpus, ElementsAre(0, 2, 3, 4));
}

}  // namespace
}  // namespace gpuorch::sched

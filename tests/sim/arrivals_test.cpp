// The tuning rule (protocol §3, step 5): a seeded permutation of the trace first; below the
// target T, i.i.d. clones are appended until the next draw's per-GPU milli would push demand
// over T; above it, random pods are removed until demand <= T.
#include "gpuorch/sim/arrivals.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "support/test_support.hpp"

namespace gpuorch::sim {
namespace {

using test::pod;
using ::testing::ElementsAre;

std::vector<workload::PodSpec> mixed_trace() {
  std::vector<workload::PodSpec> t;
  for (int i = 0; i < 40; ++i) {
    const int kind = i % 5;
    if (kind == 0) t.push_back(pod(fmt::format("p{:02}", i), 4000, 0, 0));
    if (kind == 1) t.push_back(pod(fmt::format("p{:02}", i), 3000, 1, 810));
    if (kind == 2) t.push_back(pod(fmt::format("p{:02}", i), 8000, 1, 1000));
    if (kind == 3) t.push_back(pod(fmt::format("p{:02}", i), 16000, 2, 1000));
    if (kind == 4) t.push_back(pod(fmt::format("p{:02}", i), 64000, 8, 1000));
  }
  return t;
}

std::int64_t demand(const std::vector<workload::PodSpec>& trace,
                    const std::vector<std::uint32_t>& order) {
  std::int64_t d = 0;
  for (const auto i : order) d += trace[i].total_gpu_milli();
  return d;
}

bool is_permutation_of_trace(std::vector<std::uint32_t> head, std::size_t n) {
  std::sort(head.begin(), head.end());
  std::vector<std::uint32_t> all(n);
  std::iota(all.begin(), all.end(), 0U);
  return head == all;
}

TEST(TunedArrivals, BelowTargetAppendsClonesUntilTheNextDrawWouldExceedIt) {
  const auto trace = mixed_trace();  // demand 8*810 + 8*1000 + 8*2000 + 8*8000 = 94480
  std::vector<std::uint32_t> all(trace.size());
  std::iota(all.begin(), all.end(), 0U);
  ASSERT_EQ(demand(trace, all), 94480);
  const std::int64_t capacity = 100000;
  const double tune = 1.3;  // T = 130000
  const std::int64_t target = 130000;
  base::Rng rng(42);
  const auto order = tuned_arrivals(trace, tune, capacity, rng);
  ASSERT_GT(order.size(), trace.size());
  EXPECT_TRUE(is_permutation_of_trace({order.begin(), order.begin() + 40}, trace.size()));

  // Replay the rule with the same stream: after the shuffle, each appended index is the next
  // draw, accepted while demand + its per-GPU milli <= T; the first draw that fails ends it.
  base::Rng replay(42);
  std::vector<std::uint32_t> scratch(trace.size());
  replay.shuffle(std::span<std::uint32_t>(scratch));
  std::int64_t d = 94480;
  for (std::size_t k = 40; k < order.size(); ++k) {
    const auto i = replay.below(trace.size());
    ASSERT_EQ(order[k], i) << "clone " << k;
    ASSERT_LE(d + trace[i].gpu_milli, target);
    d += trace[i].total_gpu_milli();
  }
  const auto stop = replay.below(trace.size());
  EXPECT_GT(d + trace[stop].gpu_milli, target);
  EXPECT_EQ(demand(trace, order), d);
}

TEST(TunedArrivals, StopTestUsesPerGpuMilliSoMultiGpuClonesOvershoot) {
  // One 8-GPU pod (8000), T = 10000: 8000 + 1000 <= T, so a clone is added (demand 16000);
  // then 16000 + 1000 > T stops.
  const std::vector<workload::PodSpec> trace{pod("big", 64000, 8, 1000)};
  base::Rng rng(1);
  const auto order = tuned_arrivals(trace, 1.0, 10000, rng);
  EXPECT_THAT(order, ElementsAre(0U, 0U));
  EXPECT_EQ(demand(trace, order), 16000);
}

TEST(TunedArrivals, CpuOnlyClonesNeverStopTheLoop) {
  const std::vector<workload::PodSpec> trace{pod("cpu", 4000, 0, 0), pod("gpu", 4000, 1, 500)};
  base::Rng rng(5);
  const auto order = tuned_arrivals(trace, 1.0, 20000, rng);
  const std::int64_t d = demand(trace, order);
  EXPECT_LE(d, 20000);
  EXPECT_GT(d, 20000 - 500);  // stopped only by a GPU pod that no longer fits
  EXPECT_GT(std::count(order.begin() + 2, order.end(), 0U), 0);  // CPU-only clones appended
  EXPECT_EQ(std::count(order.begin(), order.end(), 1U), 40);     // 40 x 500 = 20000
}

TEST(TunedArrivals, AboveTargetRemovesPodsUntilAtMostTheTarget) {
  const auto trace = mixed_trace();  // 94480
  for (const std::uint64_t seed : {1U, 2U, 3U, 4U}) {
    base::Rng rng(seed);
    const auto order = tuned_arrivals(trace, 0.5, 100000, rng);  // T = 50000
    const std::int64_t d = demand(trace, order);
    EXPECT_LE(d, 50000);
    EXPECT_GT(d, 50000 - 8000);  // the last removal started above T (largest pod: 8000)
    std::vector<std::uint32_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "no repeats";
    EXPECT_LT(order.size(), trace.size());
  }
}

TEST(TunedArrivals, RemovalKeepsTheShuffledOrder) {
  const auto trace = mixed_trace();
  base::Rng rng(9);
  const auto order = tuned_arrivals(trace, 0.5, 100000, rng);
  base::Rng replay(9);
  std::vector<std::uint32_t> shuffled(trace.size());
  std::iota(shuffled.begin(), shuffled.end(), 0U);
  replay.shuffle(std::span<std::uint32_t>(shuffled));
  // `order` is a subsequence of the shuffled permutation.
  auto it = shuffled.begin();
  for (const auto i : order) {
    it = std::find(it, shuffled.end(), i);
    ASSERT_NE(it, shuffled.end());
    ++it;
  }
}

TEST(TunedArrivals, SameSeedSameArrivalsOtherSeedOtherOrder) {
  const auto trace = mixed_trace();
  base::Rng a(42);
  base::Rng b(42);
  base::Rng c(43);
  const auto x = tuned_arrivals(trace, 1.3, 100000, a);
  EXPECT_EQ(x, tuned_arrivals(trace, 1.3, 100000, b));
  EXPECT_NE(x, tuned_arrivals(trace, 1.3, 100000, c));
}

TEST(TunedArrivals, DemandAtTheTargetOrNoTuningIsJustAPermutation) {
  const auto trace = mixed_trace();
  base::Rng rng(3);
  const auto exact = tuned_arrivals(trace, 0.9448, 100000, rng);
  EXPECT_EQ(exact.size(), trace.size());
  EXPECT_TRUE(is_permutation_of_trace(exact, trace.size()));
  const auto off = tuned_arrivals(trace, 0, 100000, rng);
  EXPECT_TRUE(is_permutation_of_trace(off, trace.size()));
  const std::vector<workload::PodSpec> cpu_only{pod("a", 1000, 0, 0), pod("b", 1000, 0, 0)};
  EXPECT_EQ(tuned_arrivals(cpu_only, 1.3, 100000, rng).size(), 2U);
  EXPECT_TRUE(tuned_arrivals({}, 1.3, 100000, rng).empty());
}

}  // namespace
}  // namespace gpuorch::sim

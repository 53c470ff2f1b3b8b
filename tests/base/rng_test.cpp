#include "gpuorch/base/rng.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace gpuorch::base {
namespace {

TEST(Rng, SameSeedSameStream) {
  Rng a(42);
  Rng b(42);
  Rng c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto x = a.below(1000);
    EXPECT_EQ(x, b.below(1000));
    differs = differs || x != c.below(1000);
  }
  EXPECT_TRUE(differs);
}

TEST(Rng, BelowStaysInRangeAndCoversIt) {
  Rng rng(7);
  std::vector<int> hits(5, 0);
  for (int i = 0; i < 5000; ++i) {
    const auto x = rng.below(5);
    ASSERT_LT(x, 5U);
    ++hits[x];
  }
  for (const int h : hits) EXPECT_GT(h, 800);  // 1000 expected each
  EXPECT_EQ(rng.below(1), 0U);
}

TEST(Rng, ShuffleIsAPermutationAndDependsOnTheSeed) {
  std::vector<int> a(50);
  std::iota(a.begin(), a.end(), 0);
  std::vector<int> b = a;
  Rng(1).shuffle(std::span<int>(a));
  Rng(2).shuffle(std::span<int>(b));
  EXPECT_NE(a, b);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> expected(50);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(sorted, expected);
  std::vector<int> again(50);
  std::iota(again.begin(), again.end(), 0);
  Rng(1).shuffle(std::span<int>(again));
  EXPECT_EQ(again, a);
}

}  // namespace
}  // namespace gpuorch::base

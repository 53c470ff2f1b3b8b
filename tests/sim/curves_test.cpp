// Curve aggregation (protocol §6): x = round(arrived / capacity * 100) with ties to even; alloc
// per sample = round(used / capacity * 100, 2), mean per x rounded to 2 decimals; an x without
// samples takes those of x-1 and x+1; nothing there either: no value.
#include "gpuorch/sim/curves.hpp"

#include <gtest/gtest.h>

namespace gpuorch::sim {
namespace {

constexpr std::int64_t kCap = 6212000;  // openb's 6212 GPUs

FillSample sample(std::int64_t arrived, std::int64_t used, double frag = 0, double ratio = 0) {
  FillSample s;
  s.arrived_gpu_milli = arrived;
  s.used_gpu_milli = used;
  s.frag_milli = frag;
  s.frag_ratio = ratio;
  return s;
}

TEST(RoundTo, TiesToEvenLikePython) {
  EXPECT_DOUBLE_EQ(round_to(0.125, 2), 0.12);
  EXPECT_DOUBLE_EQ(round_to(0.375, 2), 0.38);
  EXPECT_DOUBLE_EQ(round_to(2.5, 0), 2.0);
  EXPECT_DOUBLE_EQ(round_to(3.5, 0), 4.0);
  EXPECT_DOUBLE_EQ(round_to(0.5, 0), 0.0);
  EXPECT_DOUBLE_EQ(round_to(2.675, 2), 2.67);  // 2.67499999... in binary
  EXPECT_DOUBLE_EQ(round_to(95.386, 2), 95.39);
  EXPECT_DOUBLE_EQ(round_to(-1.5, 0), -2.0);
}

class BuildCurves : public ::testing::Test {
 protected:
  // arrived 31060 -> 0.5 % -> x = 0; 62120 -> 1.0 -> 1; 93180 -> 1.5 -> 2; 155300 -> 2.5 -> 2;
  // 217420 -> 3.5000000000000004 -> 4; 8075600 -> 130.
  std::vector<FillSample> samples{
      sample(31060, 15530, 1000, 10),   // alloc 0.25
      sample(62120, 31060, 2000, 20),   // 0.5
      sample(93180, 62120, 3000, 30),   // 1.0
      sample(155300, 77650, 5000, 50),  // 1.25
      sample(217420, 93180, 6000, 60),  // 1.5
      sample(8075600, 6000000, 62120, 99),
  };
  FillCurves c = build_curves(samples, kCap);
};

TEST_F(BuildCurves, HalfwayArrivalRatiosRoundToEven) {
  ASSERT_TRUE(c.alloc[0].has_value());
  EXPECT_DOUBLE_EQ(*c.alloc[0], 0.25);  // 0.5 -> 0, not 1
  EXPECT_DOUBLE_EQ(*c.alloc[1], 0.5);   // only the sample at 1.0
  // x = 2 holds 1.5 -> 2 and 2.5 -> 2: mean(1.0, 1.25) = 1.125 -> 1.12 (ties to even).
  EXPECT_DOUBLE_EQ(*c.alloc[2], 1.12);
  EXPECT_DOUBLE_EQ(*c.alloc[4], 1.5);
}

TEST_F(BuildCurves, EmptyPointTakesItsNeighbours) {
  // x = 3 has no sample: x = 2 (two samples) and x = 4 (one) -> mean(1.0, 1.25, 1.5).
  ASSERT_TRUE(c.alloc[3].has_value());
  EXPECT_DOUBLE_EQ(*c.alloc[3], 1.25);
  EXPECT_DOUBLE_EQ(*c.frag_ratio[3], (30.0 + 50 + 60) / 3);
  EXPECT_DOUBLE_EQ(*c.frag_amount[3], 100.0 * ((3000.0 + 5000 + 6000) / 3) / kCap);
  // x = 5: only x = 4 has data.
  EXPECT_DOUBLE_EQ(*c.alloc[5], 1.5);
  // x = 129 borrows from 130.
  EXPECT_DOUBLE_EQ(*c.alloc[129], 96.59);
}

TEST_F(BuildCurves, NoValueWhereNeitherThePointNorItsNeighboursHaveData) {
  for (int x = 6; x <= 128; ++x) {
    EXPECT_FALSE(c.alloc[static_cast<std::size_t>(x)].has_value()) << x;
    EXPECT_FALSE(c.frag_amount[static_cast<std::size_t>(x)].has_value()) << x;
    EXPECT_FALSE(c.frag_ratio[static_cast<std::size_t>(x)].has_value()) << x;
  }
}

TEST_F(BuildCurves, FragmentationIsAMeanAsPercentOfCapacity) {
  EXPECT_DOUBLE_EQ(*c.frag_amount[2], 100.0 * 4000.0 / kCap);
  EXPECT_DOUBLE_EQ(*c.frag_ratio[2], 40.0);
  EXPECT_DOUBLE_EQ(*c.frag_amount[130], 1.0);  // 62120 milli of 6212000
  EXPECT_DOUBLE_EQ(*c.frag_ratio[130], 99.0);
  EXPECT_DOUBLE_EQ(*c.alloc[130], 96.59);  // 96.588...
}

TEST(BuildCurvesEdges, OvershootFeedsThe130PointOnlyThroughTheFallback) {
  // 131 % arrived: no x = 131 column, but x = 130 (empty) takes it from its neighbour.
  const std::vector<FillSample> s{sample(kCap * 131 / 100, kCap / 2)};
  const FillCurves c = build_curves(s, kCap);
  ASSERT_TRUE(c.alloc[130].has_value());
  EXPECT_DOUBLE_EQ(*c.alloc[130], 50.0);
  EXPECT_FALSE(c.alloc[129].has_value());
  // Far beyond the curve: ignored.
  const FillCurves far = build_curves(std::vector<FillSample>{sample(kCap * 2, kCap)}, kCap);
  for (const auto& v : far.alloc) EXPECT_FALSE(v.has_value());
}

TEST(BuildCurvesEdges, NoSamplesNoValues) {
  const FillCurves c = build_curves({}, kCap);
  for (const auto& v : c.alloc) EXPECT_FALSE(v.has_value());
}

}  // namespace
}  // namespace gpuorch::sim

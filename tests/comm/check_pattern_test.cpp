// The GPU check's data as runs of a periodic pattern: the runs say exactly what the element-wise
// definition of each collective says, and the pattern really repeats every kPatternPeriod.
#include "gpuorch/comm/check_pattern.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "gpuorch/comm/expected.hpp"

namespace gpuorch::comm {
namespace {

// What rank r's output holds at index i, straight from each collective's definition.
double reference(const Options& o, int n, int r, std::size_t count, std::size_t i) {
  switch (o.collective) {
    case Collective::all_reduce:
    case Collective::reduce:
      return reduced_value(o, n, i);
    case Collective::reduce_scatter:
      return reduced_value(o, n, static_cast<std::size_t>(r) * count + i);
    case Collective::all_gather:
      return input_value(o, static_cast<int>(i / count), i % count);
    case Collective::broadcast:
      return input_value(o, o.root, i);
    case Collective::alltoall:
      return input_value(o, static_cast<int>(i / count),
                         static_cast<std::size_t>(r) * count + i % count);
    case Collective::sendrecv:
      return input_value(o, (r - 1 + n) % n, i);
  }
  return 0;
}

TEST(CheckPattern, RunsMatchTheDefinitionForEveryCollective) {
  constexpr int kRanks = 3;
  constexpr std::size_t kCount = 40;  // more than one period
  for (const auto& name : collective_names()) {
    for (const char* op : {"sum", "prod", "max"}) {
      Options o;
      o.collective = *parse_collective(name);
      o.type = *parse_type("int32");
      o.op = *parse_op(op);
      o.root = 1;
      for (int r = 0; r < kRanks; ++r) {
        const auto segs = expected_output(o, kRanks, r, kCount);
        if (o.collective == Collective::reduce && r != o.root) {
          EXPECT_TRUE(segs.empty());
          continue;
        }
        std::size_t covered = 0;
        for (const auto& s : segs) {
          const auto bytes = encode_values(o, kRanks, s.source_rank, s.first, s.length);
          ASSERT_EQ(bytes.size(), s.length * 4);
          for (std::size_t j = 0; j < s.length; ++j) {
            std::int32_t got = 0;
            std::memcpy(&got, bytes.data() + j * 4, 4);
            EXPECT_EQ(got, reference(o, kRanks, r, kCount, s.out_begin + j))
                << name << " " << op << " rank " << r << " at " << s.out_begin + j;
          }
          covered += s.length;
        }
        EXPECT_EQ(covered, element_counts(o.collective, kCount, kRanks).recv) << name;
      }
    }
  }
}

TEST(CheckPattern, PatternRepeatsEveryPeriod) {
  for (const char* op : {"sum", "prod", "min", "max", "avg"}) {
    Options o;
    o.op = *parse_op(op);
    for (std::size_t i = 0; i < 100; ++i) {
      EXPECT_EQ(input_value(o, 2, i), input_value(o, 2, i + kPatternPeriod)) << op;
      EXPECT_EQ(reduced_value(o, 5, i), reduced_value(o, 5, i + 7 * kPatternPeriod)) << op;
    }
  }
}

}  // namespace
}  // namespace gpuorch::comm

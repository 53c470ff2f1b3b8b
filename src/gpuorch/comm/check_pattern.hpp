#pragma once
// The data of the correctness check (-c): what each rank's input holds and what its output must
// hold, as runs of the reference pattern (input_value / reduced_value in bench.hpp). The pattern
// repeats every kPatternPeriod elements, so the GPU backend fills gigabytes by copying one tile
// on the device and checks them against one tile per run with memcmp.
#include <cstddef>
#include <vector>

#include "gpuorch/comm/bench.hpp"

namespace gpuorch::comm {

// input_value repeats every 11 (sum, max, ...) or 3 (prod) indexes; both divide 33.
constexpr std::size_t kPatternPeriod = 33;

// out[out_begin + j] == value(first + j) for j < length, where value is input_value(source_rank,
// ·), or reduced_value over all ranks when source_rank < 0.
struct Segment {
  std::size_t out_begin = 0, length = 0;
  int source_rank = -1;
  std::size_t first = 0;
};
// What rank `rank`'s receive buffer must hold after one collective (nothing: not checked, e.g. a
// non-root rank of reduce).
std::vector<Segment> expected_output(const Options& o, int nranks, int rank, std::size_t count);

// value(first + j), j < n, encoded as o.type elements (n * o.type.bytes bytes).
std::vector<unsigned char> encode_values(const Options& o, int nranks, int source_rank,
                                         std::size_t first, std::size_t n);

}  // namespace gpuorch::comm

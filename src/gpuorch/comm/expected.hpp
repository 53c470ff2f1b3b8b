#pragma once
// What each collective must leave in a rank's output, from the inputs of bench.hpp's input_value:
// the reference both backends check against (and the element counts each rank sends and receives).
#include <cstddef>

#include "gpuorch/comm/bench.hpp"

namespace gpuorch::comm {

struct ElementCounts {
  std::size_t send = 0;  // elements a rank contributes
  std::size_t recv = 0;  // elements a rank receives
};
// `count` is nccl-tests' per-rank count (SizePoint::count).
ElementCounts element_counts(Collective c, std::size_t count, int nranks);

// The value at output index i of `rank` (before rounding to the element type).
double expected_value(const Options& o, int nranks, int rank, std::size_t count, std::size_t i);

// Whether `rank` has an output to check (reduce: the root only).
bool has_output(const Options& o, int rank);

}  // namespace gpuorch::comm

#pragma once
// Curves of a fill experiment as the FGD study builds them: one sample after every arriving pod,
// then for each x = 0..130 (arrived GPU demand as % of capacity) the mean of the samples whose
// rounded arrival ratio is x (or, when there are none, x-1..x+1).
#include <array>
#include <cstdint>
#include <optional>
#include <span>

namespace gpuorch::sim {

inline constexpr int kCurvePoints = 131;  // x = 0..130

struct FillSample {
  std::int64_t arrived_gpu_milli = 0;  // every pod tried so far, placed or not
  std::int64_t used_gpu_milli = 0;
  double frag_milli = 0;  // cluster fragment amount
  double frag_ratio = 0;  // % of idle GPU milli that is fragment
};

using Curve = std::array<std::optional<double>, kCurvePoints>;

struct FillCurves {
  Curve alloc;        // % of GPU capacity allocated, 2 decimals
  Curve frag_amount;  // fragment as % of GPU capacity
  Curve frag_ratio;   // fragment as % of idle GPU
};

FillCurves build_curves(std::span<const FillSample> samples, std::int64_t gpu_milli_capacity);

// Python's round(value, digits) for the values we meet (ties to even, like the study's merge).
double round_to(double value, int digits);

}  // namespace gpuorch::sim

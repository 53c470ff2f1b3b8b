#include "gpuorch/sim/curves.hpp"

#include <cmath>
#include <vector>

namespace gpuorch::sim {

double round_to(double value, int digits) {
  const double scale = std::pow(10.0, digits);
  const double scaled = value * scale;
  double rounded = std::nearbyint(scaled);
  // Python rounds the exact binary value. When the product lands exactly on a half, the exact
  // value * scale may lie just below or above it (2.675 is 2.67499999...): its rounding error,
  // exact through fma, says which way; only a true tie goes to even.
  if (std::fabs(scaled - rounded) == 0.5) {
    const double error = std::fma(value, scale, -scaled);
    if (error > 0) rounded = scaled + 0.5;
    if (error < 0) rounded = scaled - 0.5;
  }
  return rounded / scale;
}

FillCurves build_curves(std::span<const FillSample> samples, std::int64_t capacity) {
  struct Bucket {
    double alloc = 0, amount = 0, ratio = 0;
    std::size_t count = 0;
  };
  // Arrivals may overshoot 130 % a little (a clone can exceed the target by up to 7 GPUs).
  std::vector<Bucket> buckets(kCurvePoints + 2);
  const auto cap = static_cast<double>(capacity);
  for (const FillSample& s : samples) {
    const double arrive = std::nearbyint(static_cast<double>(s.arrived_gpu_milli) / cap * 100.0);
    if (arrive < 0 || arrive >= static_cast<double>(buckets.size())) continue;
    Bucket& b = buckets[static_cast<std::size_t>(arrive)];
    b.alloc += round_to(static_cast<double>(s.used_gpu_milli) / cap * 100.0, 2);
    b.amount += s.frag_milli;
    b.ratio += s.frag_ratio;
    ++b.count;
  }
  FillCurves curves;
  for (int x = 0; x < kCurvePoints; ++x) {
    Bucket sum = buckets[static_cast<std::size_t>(x)];
    if (sum.count == 0) {
      for (const int y : {x - 1, x + 1}) {
        if (y < 0) continue;
        const Bucket& b = buckets[static_cast<std::size_t>(y)];
        sum.alloc += b.alloc;
        sum.amount += b.amount;
        sum.ratio += b.ratio;
        sum.count += b.count;
      }
    }
    if (sum.count == 0) continue;
    const auto n = static_cast<double>(sum.count);
    curves.alloc[static_cast<std::size_t>(x)] = round_to(sum.alloc / n, 2);
    curves.frag_amount[static_cast<std::size_t>(x)] = 100.0 * (sum.amount / n) / cap;
    curves.frag_ratio[static_cast<std::size_t>(x)] = sum.ratio / n;
  }
  return curves;
}

}  // namespace gpuorch::sim

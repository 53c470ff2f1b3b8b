#include "gpuorch/sim/arrivals.hpp"

#include <cmath>
#include <numeric>

namespace gpuorch::sim {

std::vector<std::uint32_t> tuned_arrivals(std::span<const workload::PodSpec> trace, double tune,
                                          std::int64_t capacity, base::Rng& rng) {
  std::vector<std::uint32_t> order(trace.size());
  std::iota(order.begin(), order.end(), 0U);
  rng.shuffle(std::span<std::uint32_t>(order));
  if (tune <= 0 || trace.empty()) return order;
  const auto target = static_cast<std::int64_t>(std::llround(tune * static_cast<double>(capacity)));
  std::int64_t demand = 0;
  for (const auto& p : trace) demand += p.total_gpu_milli();
  if (demand < target) {
    // The stop test uses the drawn pod's per-GPU milli, as the study does: an 8-GPU clone can
    // overshoot the target, and CPU-only clones never stop the loop.
    bool any_gpu = false;
    for (const auto& p : trace) any_gpu = any_gpu || p.gpu_count > 0;
    if (!any_gpu) return order;
    while (true) {
      const auto i = static_cast<std::uint32_t>(rng.below(trace.size()));
      if (demand + trace[i].gpu_milli > target) break;
      order.push_back(i);
      demand += trace[i].total_gpu_milli();
    }
  } else {
    while (demand > target && !order.empty()) {
      const auto at = static_cast<std::size_t>(rng.below(order.size()));
      demand -= trace[order[at]].total_gpu_milli();
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(at));
    }
  }
  return order;
}

}  // namespace gpuorch::sim

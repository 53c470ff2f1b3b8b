#pragma once
// The study's arrival sequence: a seeded shuffle of the trace, then "tuned" so the total GPU
// demand is T x cluster GPU capacity (T = 1.3 by default): i.i.d. clones of trace pods are
// appended while demand is below the target, random pods removed while it is above.
#include <cstdint>
#include <span>
#include <vector>

#include "gpuorch/base/rng.hpp"
#include "gpuorch/workload/pod_spec.hpp"

namespace gpuorch::sim {

// `trace` in its canonical order (sorted by name). Returns indices into `trace`, in arrival order
// (a clone repeats the index of the pod it copies).
std::vector<std::uint32_t> tuned_arrivals(std::span<const workload::PodSpec> trace, double tune,
                                          std::int64_t gpu_milli_capacity, base::Rng& rng);

}  // namespace gpuorch::sim

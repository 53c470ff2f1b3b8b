#pragma once
// The resources queues account: GPUs (milli), CPU (milli) and memory (MiB), then the GPUs (milli)
// of each GPU model a queue file names (spec.resources.gpuModels, QueueTree::gpu_models), as a
// small fixed vector so quotas, shares and dominant-resource comparisons (DRF) read the same for
// each and a round allocates nothing per job. A replica's GPUs count in `gpu` and, when its model
// has a slot, in that model's slot too: the overall entry still bounds the total.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>

#include "gpuorch/workload/pod_spec.hpp"
#include "gpuorch/workload/queue_spec.hpp"

namespace gpuorch::sched::jobs {

// Slots for GPU models: few clusters mix more than a handful of models, and every slot costs each
// loop over the kinds in a round (bench/job_layer_round.cpp).
inline constexpr std::size_t kGpuModelSlots = workload::kMaxQueueGpuModels;
inline constexpr std::size_t kFirstModelSlot = 3;  // after gpu, cpu, memory
inline constexpr std::size_t kResourceKinds = kFirstModelSlot + kGpuModelSlots;

struct Resources {
  std::array<std::int64_t, kResourceKinds> v{};

  [[nodiscard]] std::int64_t gpu_milli() const { return v[0]; }
  Resources& operator+=(const Resources& o) {
    for (std::size_t i = 0; i < kResourceKinds; ++i) v[i] += o.v[i];
    return *this;
  }
  Resources& operator-=(const Resources& o) {
    for (std::size_t i = 0; i < kResourceKinds; ++i) v[i] -= o.v[i];
    return *this;
  }
  friend Resources operator+(Resources a, const Resources& b) { return a += b; }
  friend Resources operator-(Resources a, const Resources& b) { return a -= b; }
  friend Resources operator*(Resources a, std::int64_t k) {
    for (auto& x : a.v) x *= k;
    return a;
  }
  // Every component at most the other's.
  [[nodiscard]] bool fits_in(const Resources& cap) const {
    for (std::size_t i = 0; i < kResourceKinds; ++i) {
      if (v[i] > cap.v[i]) return false;
    }
    return true;
  }
  [[nodiscard]] bool empty() const {
    return std::all_of(v.begin(), v.end(), [](std::int64_t x) { return x == 0; });
  }
  bool operator==(const Resources&) const = default;
};

// What one replica of `pod` holds; `model_slot` (QueueTree::model_slot of the model it runs on or
// is restricted to; none: counted in no model's slot) gets its GPUs too.
inline Resources request_of(const workload::PodSpec& pod,
                            std::optional<std::size_t> model_slot = std::nullopt) {
  Resources r{{pod.gpu_count * pod.gpu_milli, pod.cpu_milli, pod.memory_mib}};
  if (model_slot) r.v[*model_slot] = r.v[0];
  return r;
}

}  // namespace gpuorch::sched::jobs

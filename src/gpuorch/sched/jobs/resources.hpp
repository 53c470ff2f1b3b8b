#pragma once
// The resources queues account: GPUs (milli), CPU (milli) and memory (MiB), as a small vector so
// quotas, shares and dominant-resource comparisons (DRF) read the same for each.
#include <algorithm>
#include <array>
#include <cstdint>

#include "gpuorch/workload/pod_spec.hpp"

namespace gpuorch::sched::jobs {

inline constexpr std::size_t kResourceKinds = 3;  // gpu, cpu, memory
inline constexpr std::array<const char*, kResourceKinds> kResourceNames = {"gpu", "cpu", "memory"};

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

// What one replica of `pod` holds.
inline Resources request_of(const workload::PodSpec& pod) {
  return Resources{{pod.gpu_count * pod.gpu_milli, pod.cpu_milli, pod.memory_mib}};
}

}  // namespace gpuorch::sched::jobs

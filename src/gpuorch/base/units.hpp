#pragma once
// The field's units: CPU and GPU in milli (1000 = one core / one whole GPU), memory in MiB.
#include <cstdint>

namespace gpuorch::base {

inline constexpr std::int64_t kMilliPerGpu = 1000;
inline constexpr std::int64_t kMilliPerCore = 1000;

}  // namespace gpuorch::base

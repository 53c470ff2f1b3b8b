#pragma once
// The driver's opaque configuration, `GpuConfig`: how the GPUs of a claim are shared. Field names
// and meanings are those of NVIDIA's DRA driver (k8s-dra-driver-gpu, API
// resource.nvidia.com/v1beta1, sharing.go and validate.go), so a claim written for it carries
// over by changing only `opaque.driver`; both NVIDIA's apiVersion and gpuorch's own
// (gpu.gpuorch.io/v1beta1) are read, since `opaque.driver` already says which driver the
// parameters are for. Unknown fields are refused by name rather than ignored: a misspelt
// `defaultActiveThreadPercentage` would otherwise leave a claim unlimited without a word.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

namespace gpuorch::k8s::dra {

inline constexpr const char* kGpuConfigApiVersion = "gpu.gpuorch.io/v1beta1";
inline constexpr const char* kNvidiaGpuConfigApiVersion = "resource.nvidia.com/v1beta1";

// A configuration the driver cannot apply: Prepare fails for that claim with this message (the
// kubelet shows it as the pod's event), naming the field.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class SharingStrategy { kNone, kTimeSlicing, kMps };

// nvidia-smi compute-policy --set-timeslice's values: 0 DEFAULT, 1 SHORT, 2 MEDIUM, 3 LONG.
enum class TimeSliceInterval { kDefault = 0, kShort = 1, kMedium = 2, kLong = 3 };

struct MpsConfig {
  std::optional<int> default_active_thread_percentage;  // 0-100
  std::optional<std::int64_t> default_pinned_device_memory_mib;
  // Key: a device's UUID or its position among the claim's MPS devices ("0", "1"), as NVIDIA's
  // driver reads it; resolved at Prepare, when the devices are known.
  std::map<std::string, std::int64_t> default_per_device_pinned_memory_mib;
  bool operator==(const MpsConfig&) const = default;
};

struct GpuConfig {
  SharingStrategy strategy = SharingStrategy::kNone;
  TimeSliceInterval interval = TimeSliceInterval::kDefault;
  MpsConfig mps;
  bool operator==(const GpuConfig&) const = default;
};

// `parameters` of an opaque configuration for this driver. Throws ConfigError ("sharing.strategy:
// ...") naming the first field that is wrong.
[[nodiscard]] GpuConfig parse_gpu_config(const nlohmann::json& parameters);

[[nodiscard]] const char* to_string(SharingStrategy s);
[[nodiscard]] const char* to_string(TimeSliceInterval i);

}  // namespace gpuorch::k8s::dra

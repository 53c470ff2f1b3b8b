#pragma once
// MIG GPU instance profiles per GPU model (MIG User Guide, "Supported MIG Profiles"; reference
// §3): the memory slices a profile occupies, its SM slices, where it may start and how many
// instances of it one GPU holds. Shared by the device plugin, the simulator and the scheduler.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuorch::mig {

inline constexpr int kMemorySlices = 8;   // each 1/8 of the GPU's memory
inline constexpr int kComputeSlices = 7;  // each 1/7 of the SMs

struct Profile {
  std::string name;  // "3g.40gb", "1g.10gb+me"
  int id = 0;        // nvidia-smi's GPU instance profile ID (19, 20, 15, 14, 9, 5, 0)
  int compute_slices = 0;
  int memory_slices = 0;    // the placement size
  std::vector<int> starts;  // allowed first memory slice
  int max_instances = 0;    // per GPU
  [[nodiscard]] bool media_extensions() const { return name.ends_with("+me"); }
};

struct GpuModel {
  std::string name;  // "H100-80GB"
  std::vector<Profile> profiles;
  [[nodiscard]] const Profile* profile(std::string_view name) const;
};

// The MIG-capable models gpuorch knows: A100-40GB, A100-80GB, H100-80GB, H100-94GB, H200-141GB.
const std::vector<GpuModel>& models();
const GpuModel* model(std::string_view name);
// The model of a GPU from its marketing name and memory ("NVIDIA H100 80GB HBM3", 81559 MiB);
// nothing when the GPU does not support MIG or is not in the table.
const GpuModel* model_for_gpu(std::string_view marketing_name, long long memory_mib);

// The Kubernetes resource NVIDIA's plugin gives a profile in the mixed strategy:
// "nvidia.com/mig-" + profile with '+' written as '.' ("nvidia.com/mig-1g.10gb.me").
std::string mixed_resource_name(std::string_view profile);

}  // namespace gpuorch::mig

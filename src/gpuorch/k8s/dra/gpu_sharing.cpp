#include "gpuorch/k8s/dra/gpu_sharing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <charconv>
#include <optional>

#include "gpuorch/base/printable.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"

namespace gpuorch::k8s::dra {
namespace {

// A device's UUID as CUDA and nvidia-smi take it; a recording without UUIDs gives the index.
std::string uuid_of(const topology::Host& host, const SliceDevice& d) {
  const auto& g = host.gpus[static_cast<std::size_t>(d.gpu)];
  const std::string& id =
      d.mig < 0 ? g.uuid : g.mig.instances[static_cast<std::size_t>(d.mig)].uuid;
  return id.empty() ? std::to_string(g.index) : id;
}

// NVIDIA's reading of a defaultPerDevicePinnedMemoryLimit key: a UUID of the daemon's devices,
// else a position in their list.
std::optional<std::string> device_key(const std::string& key,
                                      const std::vector<std::string>& uuids) {
  if (std::find(uuids.begin(), uuids.end(), key) != uuids.end()) return key;
  std::size_t position = 0;
  const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), position);
  if (ec == std::errc() && end == key.data() + key.size() && position < uuids.size()) {
    return uuids[position];
  }
  return std::nullopt;
}

}  // namespace

PreparedSharing plan_sharing(const topology::Host& host, const std::vector<std::string>& devices,
                             const std::vector<GpuConfig>& configs) {
  assert(devices.size() == configs.size());
  const std::vector<SliceDevice> known = slice_devices(host);
  PreparedSharing out;
  std::optional<MpsConfig> mps;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const GpuConfig& c = configs[i];
    if (c.strategy == SharingStrategy::kNone) continue;
    const auto d = std::find_if(known.begin(), known.end(),
                                [&](const SliceDevice& k) { return k.name == devices[i]; });
    if (d == known.end()) {
      throw ConfigError(fmt::format("device {} is not one of this node's", devices[i]));
    }
    const auto& g = host.gpus[static_cast<std::size_t>(d->gpu)];
    if (g.vendor != topology::Vendor::kNvidia) {
      throw ConfigError(fmt::format("device {}: {} sharing is for NVIDIA GPUs", devices[i],
                                    to_string(c.strategy)));
    }
    const std::string uuid = uuid_of(host, *d);
    if (c.strategy == SharingStrategy::kTimeSlicing) {
      if (d->mig >= 0) {
        throw ConfigError(fmt::format(
            "device {}: sharing.strategy TimeSlicing sets a whole GPU's time slice; {} is a MIG "
            "instance (NVIDIA's driver takes no interval for MIG devices either)",
            devices[i], devices[i]));
      }
      const TimeSlice t{uuid, static_cast<int>(c.interval)};
      const auto same = std::find_if(out.time_slices.begin(), out.time_slices.end(),
                                     [&](const TimeSlice& s) { return s.uuid == uuid; });
      if (same == out.time_slices.end()) out.time_slices.push_back(t);
      continue;
    }
    if (mps && !(*mps == c.mps)) {
      throw ConfigError(fmt::format(
          "device {}: a second, different sharing.mpsConfig in one claim; gpuorch runs one MPS "
          "control daemon per claim, so its devices share one configuration",
          devices[i]));
    }
    mps = c.mps;
    if (std::find(out.mps_devices.begin(), out.mps_devices.end(), uuid) == out.mps_devices.end()) {
      out.mps_devices.push_back(uuid);
    }
  }
  if (!mps) return out;
  out.mps_active_thread_percentage = mps->default_active_thread_percentage;
  if (mps->default_pinned_device_memory_mib) {
    for (const auto& u : out.mps_devices)
      out.mps_pinned_mib[u] = *mps->default_pinned_device_memory_mib;
  }
  for (const auto& [key, mib] : mps->default_per_device_pinned_memory_mib) {
    const auto uuid = device_key(key, out.mps_devices);
    if (!uuid) {
      throw ConfigError(fmt::format(
          "GpuConfig sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[{}]: neither the UUID "
          "of one of the claim's {} MPS device(s) nor a position 0-{}",
          base::quoted_printable(key, 80), out.mps_devices.size(), out.mps_devices.size() - 1));
    }
    out.mps_pinned_mib[*uuid] = mib;
  }
  return out;
}

}  // namespace gpuorch::k8s::dra

#pragma once
// What the driver has prepared, kept in a file so a restarted driver answers NodePrepareResources
// for a claim it prepared before with the same devices (the kubelet calls again after either of
// them restarts) and knows what Unprepare has to undo. Written whole and renamed into place after
// every change, so a crash leaves the old file or the new one, never half of one.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpuorch::k8s::dra {

struct PreparedDevice {
  std::vector<std::string> requests;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_device_ids;
  bool operator==(const PreparedDevice&) const = default;
};

// What a claim's GpuConfig changed on the node, so Unprepare (or a restarted driver) can undo it
// or bring it back: the GPUs whose time slice was set, and the claim's MPS control daemon with
// the settings it was started with.
struct TimeSlice {
  std::string uuid;
  int interval = 0;  // nvidia-smi compute-policy --set-timeslice's value
  bool operator==(const TimeSlice&) const = default;
};

struct PreparedSharing {
  std::vector<TimeSlice> time_slices;
  std::string mps_root;                  // the daemon's folder (pipe/, log/, shm/); empty: none
  std::vector<std::string> mps_devices;  // its CUDA_VISIBLE_DEVICES: GPU or MIG UUIDs
  std::optional<int> mps_active_thread_percentage;
  std::map<std::string, std::int64_t> mps_pinned_mib;  // per UUID of mps_devices
  [[nodiscard]] bool empty() const { return time_slices.empty() && mps_devices.empty(); }
  bool operator==(const PreparedSharing&) const = default;
};

struct PreparedClaim {
  std::string ns, name;
  std::vector<PreparedDevice> devices;
  PreparedSharing sharing;
};

// Keyed by the claim's UID.
using PreparedClaims = std::map<std::string, PreparedClaim>;

// The file's claims. A missing file is none; a claim without `sharing` (a file of a driver
// before it) shares nothing; a file that cannot be read as a checkpoint throws
// std::runtime_error ("PATH: what is wrong").
[[nodiscard]] PreparedClaims load_checkpoint(const std::string& path);
void save_checkpoint(const std::string& path, const PreparedClaims& claims);

}  // namespace gpuorch::k8s::dra

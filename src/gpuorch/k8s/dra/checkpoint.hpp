#pragma once
// What the driver has prepared, kept in a file so a restarted driver answers NodePrepareResources
// for a claim it prepared before with the same devices (the kubelet calls again after either of
// them restarts) and knows what Unprepare has to undo. Written whole and renamed into place after
// every change, so a crash leaves the old file or the new one, never half of one.
#include <map>
#include <string>
#include <vector>

namespace gpuorch::k8s::dra {

struct PreparedDevice {
  std::vector<std::string> requests;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_device_ids;
};

struct PreparedClaim {
  std::string ns, name;
  std::vector<PreparedDevice> devices;
};

// Keyed by the claim's UID.
using PreparedClaims = std::map<std::string, PreparedClaim>;

// The file's claims. A missing file is none; a file that cannot be read as a checkpoint throws
// std::runtime_error ("PATH: what is wrong").
[[nodiscard]] PreparedClaims load_checkpoint(const std::string& path);
void save_checkpoint(const std::string& path, const PreparedClaims& claims);

}  // namespace gpuorch::k8s::dra

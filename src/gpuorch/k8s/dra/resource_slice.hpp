#pragma once
// The ResourceSlice (resource.k8s.io/v1) that `gpuorch dra-driver` publishes for its node: one
// pool named after the node, one slice in it, one device per GPU (per MIG instance on a GPU with
// MIG enabled, static MIG), built from the same topology::Host as the device plugin and the
// scheduler's node, so a claim's selectors and matchAttribute constraints see the hardware the
// GPU picker sees. docs/dra.md lists the attributes.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/topology/host.hpp"

namespace gpuorch::k8s::dra {

inline constexpr const char* kDriverName = "gpu.gpuorch.io";
inline constexpr const char* kResourceApi = "/apis/resource.k8s.io/v1";

struct SliceOptions {
  std::string driver = kDriverName;
  std::string node_name;
  // The pool's generation: a consumer ignores slices of an older generation than the newest it
  // sees, so every change of the devices publishes a higher one.
  std::int64_t generation = 1;
};

// One published device and where it comes from.
struct SliceDevice {
  std::string name;  // DNS label: "gpu-3", "gpu-3-mig-1-0"
  int gpu = 0;       // index into Host::gpus
  int mig = -1;      // index into the GPU's MIG instances; -1 for the whole GPU
};

// The devices the slice lists, in order (GPUs by index, a MIG-enabled GPU's instances in place of
// it).
[[nodiscard]] std::vector<SliceDevice> slice_devices(const topology::Host& host);

// The slice's name: "<node>-<driver>", one per node and driver (a DNS subdomain). Throws
// base::InputError when the node name is not a DNS subdomain or the name grows too long.
[[nodiscard]] std::string slice_name(const SliceOptions& o);

// The whole object, ready to create (no resourceVersion, no owner).
[[nodiscard]] nlohmann::json resource_slice(const topology::Host& host, const SliceOptions& o);

// A driver version as the API's `version` attribute needs it: semantic versioning 2.0, three
// numbers without leading zeros ("535.104.05" -> "535.104.5", "12.4" -> "12.4.0"); empty when it
// cannot be one.
[[nodiscard]] std::string semantic_version(const std::string& dotted);

// Per GPU (Host::gpus order), the lowest index of the GPUs it reaches over NVLink (directly or
// through others: one NVSwitch fabric is one domain); -1 for a GPU without an NVLink peer.
[[nodiscard]] std::vector<int> nvlink_domains(const topology::Host& host);

}  // namespace gpuorch::k8s::dra

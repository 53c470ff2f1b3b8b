#pragma once
// The device plugin's configuration file, in the format of NVIDIA's k8s-device-plugin
// (api/config/v1: version, flags, resources, sharing, imex) so an existing ConfigMap works
// unchanged. docs/device-plugin.md lists every key; unknown keys are errors, not silently
// ignored, because a misspelt `replicas` would otherwise quietly turn sharing off.
#include <optional>
#include <string>
#include <vector>

namespace gpuorch::k8s {

enum class MigStrategy { kNone, kSingle, kMixed };
enum class DeviceIdStrategy { kUuid, kIndex };
enum class SharingKind { kNone, kTimeSlicing, kMps };

const char* to_string(MigStrategy s);
const char* to_string(SharingKind s);

// One entry of sharing.timeSlicing.resources / sharing.mps.resources.
struct ReplicaResource {
  std::string name;    // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu"
  std::string rename;  // empty: keep the name (or name + ".shared" with renameByDefault)
  // devices: "all" (default), a count of devices, or a list of GPU indices, "gpu:mig" indices
  // and GPU-/MIG- UUIDs.
  bool all_devices = true;
  int device_count = 0;
  std::vector<std::string> device_list;
  int replicas = 0;  // >= 2
  int line = 0;      // where it was written, for later errors
};

struct ReplicatedResources {
  bool rename_by_default = false;
  bool fail_requests_greater_than_one = false;
  std::vector<ReplicaResource> resources;
};

struct PluginConfig {
  std::string source;  // the file, or "defaults"
  MigStrategy mig_strategy = MigStrategy::kNone;
  bool fail_on_init_error = true;
  std::string nvidia_driver_root = "/";
  bool gds_enabled = false;
  bool mofed_enabled = false;
  bool pass_device_specs = false;
  std::vector<std::string> device_list_strategy = {"envvar"};  // envvar, volume-mounts, cdi-*
  DeviceIdStrategy device_id_strategy = DeviceIdStrategy::kUuid;
  std::string cdi_annotation_prefix = "cdi.k8s.io/";
  SharingKind sharing = SharingKind::kNone;
  ReplicatedResources replicated;  // of `sharing`

  [[nodiscard]] bool has_list_strategy(const std::string& s) const;
};

// Parses YAML (or JSON) text; throws base::InputError "file:line: what is wrong".
PluginConfig parse_config(const std::string& text, const std::string& file);
PluginConfig load_config(const std::string& path);

// Flag values as NVIDIA's plugin spells them; throw base::InputError on anything else.
MigStrategy parse_mig_strategy(const std::string& s);
DeviceIdStrategy parse_device_id_strategy(const std::string& s);
std::vector<std::string> parse_device_list_strategy(const std::string& comma_list);

}  // namespace gpuorch::k8s

#pragma once
// The device plugin's configuration file, in the format of NVIDIA's k8s-device-plugin
// (api/config/v1: version, flags, resources, sharing, imex) so an existing ConfigMap works
// unchanged, with NVIDIA's verdicts: what NVIDIA's plugin accepts loads here with the same
// meaning, what it refuses is a `file:line: what` error. Keys NVIDIA reads and then ignores
// (unknown keys, `rename`, `devices`, `resources.gpus`) load too, each with a warning line, so a
// ConfigMap that runs under NVIDIA runs here and the user still hears what has no effect.
// docs/device-plugin.md compares every key and flag.
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
  // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu"; a name without a domain gets
  // NVIDIA's default prefix ("gpu" is "nvidia.com/gpu").
  std::string name;
  // As written (checked like a name); NVIDIA's plugin ignores it, and so does the plan: the
  // shared resource is `name`, or `name`.shared with renameByDefault.
  std::string rename;
  // devices as written: "all" (default), a count, or a list of GPU indices, "gpu:mig" indices and
  // GPU-/MIG- UUIDs. Checked as NVIDIA checks them, then ignored as NVIDIA ignores them: every
  // device of the resource is shared.
  bool all_devices = true;
  int device_count = 0;
  std::vector<std::string> device_list;
  int replicas = 0;  // 2..kMaxReplicas
  int line = 0;      // where it was written, for later errors
};

// The most replicas of one device: each is a device ID the plugin lists to the kubelet and keeps
// in memory, and a million of them took 2.5 GB against the DaemonSet's 64 Mi limit; 64 pods
// sharing one GPU is already far past useful. docs/device-plugin.md says so.
inline constexpr int kMaxReplicas = 64;

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
  std::string nvidia_dev_root;  // empty: the driver root (NVIDIA's default)
  // Where the MPS control daemon keeps <resource>/{pipe,log} and shm; empty: gpuorch's default,
  // <device-plugin-path>/mps (NVIDIA has no default and refuses MPS without one).
  std::string mps_root;
  std::string device_discovery_strategy = "auto";  // auto | nvml | tegra
  bool gdrcopy_enabled = false;
  bool gds_enabled = false;
  bool mofed_enabled = false;
  bool pass_device_specs = false;
  std::vector<std::string> device_list_strategy = {"envvar"};  // envvar, volume-mounts, cdi-*
  DeviceIdStrategy device_id_strategy = DeviceIdStrategy::kUuid;
  std::string cdi_annotation_prefix = "cdi.k8s.io/";
  // flags.plugin.kubeletSocket: where to register; unset: <device-plugin-path>/kubelet.sock.
  std::optional<std::string> kubelet_socket;
  SharingKind sharing = SharingKind::kNone;
  ReplicatedResources replicated;     // of `sharing`
  std::vector<int> imex_channel_ids;  // [] or [0], as NVIDIA allows; gpuorch injects none
  bool imex_required = false;
  // What was read but has no effect, one `file:line: ...` line each (printed at load).
  std::vector<std::string> warnings;

  [[nodiscard]] bool has_list_strategy(const std::string& s) const;
  [[nodiscard]] const std::string& dev_root() const {
    return nvidia_dev_root.empty() ? nvidia_driver_root : nvidia_dev_root;
  }
};

// Every key of NVIDIA's config this parser knows, dotted ("flags.plugin.passDeviceSpecs",
// "sharing.timeSlicing.resources.replicas"): the docs' comparison table is checked against it.
const std::vector<std::string>& config_keys();

// The checks NVIDIA's plugin makes once flags and environment are applied (validateFlags):
// MPS with the mixed MIG strategy, the device discovery strategy. Throws base::InputError.
void validate_effective(const PluginConfig& c);

// A resource name as NVIDIA reads one: "nvidia.com/" is added when missing, the whole is at most
// 63 characters and the part after the domain is a DNS subdomain. amd.com/gpu is gpuorch's own.
// Throws base::InputError (without a line) saying what is wrong.
std::string resource_name(const std::string& written);

// Parses YAML (or JSON) text; throws base::InputError "file:line: what is wrong".
PluginConfig parse_config(const std::string& text, const std::string& file);
PluginConfig load_config(const std::string& path);

// Flag values as NVIDIA's plugin spells them; throw base::InputError on anything else.
MigStrategy parse_mig_strategy(const std::string& s);
DeviceIdStrategy parse_device_id_strategy(const std::string& s);
std::vector<std::string> parse_device_list_strategy(const std::string& comma_list);
// IMEX channel IDs: NVIDIA allows none or channel 0 only.
void check_imex_channel_ids(const std::vector<int>& ids);

}  // namespace gpuorch::k8s

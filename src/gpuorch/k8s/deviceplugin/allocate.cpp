#include "gpuorch/k8s/deviceplugin/allocate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

namespace gpuorch::k8s {
namespace {

using topology::Gpu;

std::string visible_id(const topology::Host& host, const PhysicalDevice& d, DeviceIdStrategy s) {
  const Gpu& g = host.gpus[static_cast<std::size_t>(d.gpu)];
  if (s == DeviceIdStrategy::kIndex) {
    return d.mig < 0 ? std::to_string(g.index) : fmt::format("{}:{}", g.index, d.mig);
  }
  return d.id;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string rooted(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return (std::filesystem::path(root) / path.substr(1)).string();
}

void nvidia_allocation(const topology::Host& host, const Resource& r,
                       const std::vector<const PhysicalDevice*>& devs, const PluginConfig& config,
                       const AllocateOptions& options, ContainerAllocation& out) {
  std::vector<std::string> ids;
  for (const auto* d : devs) ids.push_back(visible_id(host, *d, config.device_id_strategy));
  if (config.has_list_strategy("envvar")) out.envs["NVIDIA_VISIBLE_DEVICES"] = join(ids, ",");
  if (config.has_list_strategy("volume-mounts")) {
    // The container toolkit reads the device list from these mount points' names.
    const std::string root = "/var/run/nvidia-container-devices";
    out.envs["NVIDIA_VISIBLE_DEVICES"] = root;
    for (const auto& id : ids) out.mounts.push_back({root + "/" + id, "/dev/null", false});
  }
  std::vector<std::string> qualified;
  for (const auto& id : ids) qualified.push_back("nvidia.com/gpu=" + id);
  if (config.has_list_strategy("cdi-annotations")) {
    out.annotations[config.cdi_annotation_prefix + "nvidia-device-plugin_" +
                    (options.response_id.empty() ? "0" : options.response_id)] =
        join(qualified, ",");
  }
  if (config.has_list_strategy("cdi-cri")) out.cdi_devices = qualified;
  if (config.gdrcopy_enabled) out.envs["NVIDIA_GDRCOPY"] = "enabled";
  if (config.gds_enabled) out.envs["NVIDIA_GDS"] = "enabled";
  if (config.mofed_enabled) out.envs["NVIDIA_MOFED"] = "enabled";
  if (config.pass_device_specs) {
    const std::string& root = config.dev_root();  // the device nodes' root (driver root by default)
    for (const char* p :
         {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}) {
      const bool required = std::string(p) == "/dev/nvidiactl";
      if (required || std::filesystem::exists(rooted(root, p))) {
        out.devices.push_back({p, rooted(root, p), "rw"});
      }
    }
    for (const auto* d : devs) {
      const Gpu& g = host.gpus[static_cast<std::size_t>(d->gpu)];
      if (g.minor < 0) continue;
      const std::string node = fmt::format("/dev/nvidia{}", g.minor);
      out.devices.push_back({node, rooted(root, node), "rw"});
    }
  }
  if (r.sharing == SharingKind::kMps) {
    // Each client gets 1/replicas of the SMs and of each GPU's memory. Inside the container the
    // allocated GPUs are numbered from 0 in this order, which is what the per-index form of
    // CUDA_MPS_PINNED_DEVICE_MEM_LIMIT refers to.
    out.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(100 / r.replicas);
    std::vector<std::string> limits;
    for (std::size_t i = 0; i < devs.size(); ++i) {
      limits.push_back(fmt::format("{}={}M", i, devs[i]->memory_mib / r.replicas));
    }
    out.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = join(limits, ",");
    // The MPS control daemon's root (flags.mpsRoot, --mps-root), laid out as NVIDIA's:
    // <root>/<resource>/{pipe,log} and <root>/shm.
    const std::filesystem::path root =
        options.config != nullptr && !options.config->mps_root.empty()
            ? std::filesystem::path(options.config->mps_root)
            : std::filesystem::path(options.device_plugin_dir) / "mps";
    const std::string base = (root / r.name).string();
    const std::string inside = "/mps/" + r.name;
    out.envs["CUDA_MPS_PIPE_DIRECTORY"] = inside + "/pipe";
    out.envs["CUDA_MPS_LOG_DIRECTORY"] = inside + "/log";
    out.mounts.push_back({inside + "/pipe", base + "/pipe", false});
    out.mounts.push_back({inside + "/log", base + "/log", false});
    out.mounts.push_back({"/dev/shm", (root / "shm").string(), false});
  }
}

void amd_allocation(const topology::Host& host, const std::vector<const PhysicalDevice*>& devs,
                    ContainerAllocation& out) {
  out.devices.push_back({"/dev/kfd", "/dev/kfd", "rw"});
  for (const auto* d : devs) {
    const Gpu& g = host.gpus[static_cast<std::size_t>(d->gpu)];
    if (g.minor >= 0) {
      const std::string card = fmt::format("/dev/dri/card{}", g.minor);
      out.devices.push_back({card, card, "rw"});
    }
    if (g.render_minor >= 0) {
      const std::string render = fmt::format("/dev/dri/renderD{}", g.render_minor);
      out.devices.push_back({render, render, "rw"});
    }
  }
}

}  // namespace

std::vector<const PhysicalDevice*> physical_devices(const Resource& resource,
                                                    const std::vector<std::string>& device_ids) {
  std::vector<const PhysicalDevice*> out;
  for (const auto& id : device_ids) {
    const PhysicalDevice* d = find_physical(resource, id);
    if (!d) {
      throw std::invalid_argument(fmt::format(
          "invalid allocation request for '{}': unknown device: {}", resource.name, id));
    }
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}

ContainerAllocation allocate(const topology::Host& host, const Resource& resource,
                             const std::vector<std::string>& device_ids,
                             const AllocateOptions& options) {
  static const PluginConfig kDefaults;
  const PluginConfig& config = options.config ? *options.config : kDefaults;
  if (resource.sharing != SharingKind::kNone && resource.fail_requests_greater_than_one &&
      device_ids.size() > 1) {
    throw std::invalid_argument(fmt::format(
        "request for '{}: {}' too large: maximum request size for shared resources is 1",
        resource.name, device_ids.size()));
  }
  const auto devs = physical_devices(resource, device_ids);
  ContainerAllocation out;
  if (resource.vendor == topology::Vendor::kAmd) {
    amd_allocation(host, devs, out);
  } else {
    nvidia_allocation(host, resource, devs, config, options, out);
  }
  return out;
}

}  // namespace gpuorch::k8s

#include "gpuorch/k8s/deviceplugin/resources.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>

#include "gpuorch/base/error.hpp"
#include "gpuorch/mig/profiles.hpp"

namespace gpuorch::k8s {
namespace {

using topology::Gpu;
using topology::Host;
using topology::Vendor;

std::vector<std::int64_t> numa_of(const Gpu& g) {
  // A negative numa_node (VMs, single-socket hosts) means "no preference": NVIDIA's plugin and
  // the kubelet both treat a missing TopologyInfo that way, while ID -1 would be a bogus node.
  if (g.numa_node < 0) return {};
  return {g.numa_node};
}

PhysicalDevice whole_gpu(const Gpu& g, int index) {
  PhysicalDevice d;
  // AMD's plugin names devices by PCI address; GPU UUIDs are NVIDIA's.
  d.id = g.vendor == Vendor::kAmd || g.uuid.empty() ? g.pci.address : g.uuid;
  d.gpu = index;
  d.memory_mib = g.memory_mib;
  d.numa_nodes = numa_of(g);
  return d;
}

// NVIDIA's plugin registers only MIG devices whose one compute instance spans the whole GPU
// instance; NVML names a smaller CI "1c.3g.40gb", which this pattern leaves out.
bool full_gpu_instance(const std::string& profile) {
  static const std::regex kFull(R"(\d+g\.\d+gb(\+me)?)");
  return std::regex_match(profile, kFull);
}

bool mig_in_use(const Gpu& g) {
  return g.vendor == Vendor::kNvidia && g.mig.enabled && !g.mig.instances.empty();
}

void add_unshared(Resource& r) {
  r.devices.clear();
  for (std::size_t i = 0; i < r.physical.size(); ++i) {
    r.devices.push_back({r.physical[i].id, static_cast<int>(i), -1});
  }
}

// `base` shared by a sharing entry. As in NVIDIA's plugin every device of the resource is shared
// (`devices` is ignored) under its own name, or <name>.shared with renameByDefault (`rename` is
// ignored).
Resource apply_sharing(Resource base, const PluginConfig& config, const ReplicaResource& entry) {
  const auto& rr = config.replicated;
  if (config.sharing == SharingKind::kMps &&
      std::any_of(base.physical.begin(), base.physical.end(),
                  [](const PhysicalDevice& d) { return d.mig >= 0; })) {
    base::fail_input(
        config.source, static_cast<std::size_t>(entry.line),
        fmt::format("{}: sharing using MPS is not supported for MIG devices", base.name));
  }
  Resource shared = std::move(base);
  shared.sharing = config.sharing;
  shared.replicas = entry.replicas;
  shared.fail_requests_greater_than_one = rr.fail_requests_greater_than_one;
  if (rr.rename_by_default) shared.name += ".shared";
  shared.devices.clear();
  for (std::size_t i = 0; i < shared.physical.size(); ++i) {
    for (int n = 0; n < entry.replicas; ++n) {
      shared.devices.push_back(
          {fmt::format("{}::{}", shared.physical[i].id, n), static_cast<int>(i), n});
    }
  }
  return shared;
}

}  // namespace

std::string Resource::socket_name() const {
  std::string n = name;
  std::replace(n.begin(), n.end(), '/', '-');
  return "gpuorch-" + n + ".sock";
}

std::string strip_replica(const std::string& id) {
  const auto p = id.find("::");
  return p == std::string::npos ? id : id.substr(0, p);
}

const PhysicalDevice* find_physical(const Resource& r, const std::string& advertised_id) {
  for (const auto& d : r.devices) {
    if (d.id == advertised_id) return &r.physical[static_cast<std::size_t>(d.physical)];
  }
  return nullptr;
}

std::vector<Resource> plan_resources(const Host& host, const PluginConfig& config,
                                     VendorFilter vendors) {
  const bool nvidia = vendors != VendorFilter::kAmd;
  const bool amd = vendors != VendorFilter::kNvidia;
  std::vector<Resource> base;
  const auto resource = [&](const std::string& name, Vendor v) -> Resource& {
    for (auto& r : base) {
      if (r.name == name) return r;
    }
    Resource r;
    r.name = name;
    r.vendor = v;
    base.push_back(std::move(r));
    return base.back();
  };

  const bool any_mig = std::any_of(host.gpus.begin(), host.gpus.end(), mig_in_use);
  if (nvidia && config.mig_strategy == MigStrategy::kSingle && any_mig) {
    // NVIDIA's rules for `single`: every GPU in MIG mode, one profile across the node.
    for (const auto& g : host.gpus) {
      if (g.vendor == Vendor::kNvidia && !mig_in_use(g)) {
        base::fail_input(fmt::format(
            "MIG strategy single: GPU {} is not in MIG mode while others are (all GPUs must "
            "agree; use mixed)",
            g.index));
      }
    }
    std::string profile;
    for (const auto& g : host.gpus) {
      for (const auto& mi : g.mig.instances) {
        if (!profile.empty() && mi.profile != profile) {
          base::fail_input(fmt::format(
              "MIG strategy single: more than one MIG device type present on node ({} and {}; "
              "use mixed)",
              profile, mi.profile));
        }
        profile = mi.profile;
      }
    }
  }
  for (std::size_t gi = 0; gi < host.gpus.size(); ++gi) {
    const Gpu& g = host.gpus[gi];
    const int index = static_cast<int>(gi);
    if (g.vendor == Vendor::kAmd) {
      if (amd) resource("amd.com/gpu", Vendor::kAmd).physical.push_back(whole_gpu(g, index));
      continue;
    }
    if (!nvidia) continue;
    if (config.mig_strategy == MigStrategy::kNone || !mig_in_use(g)) {
      resource("nvidia.com/gpu", Vendor::kNvidia).physical.push_back(whole_gpu(g, index));
      continue;
    }
    for (std::size_t m = 0; m < g.mig.instances.size(); ++m) {
      const auto& mi = g.mig.instances[m];
      if (!full_gpu_instance(mi.profile)) continue;
      PhysicalDevice d;
      d.id = mi.uuid.empty()
                 ? fmt::format("MIG-{}/{}/{}", g.uuid, mi.gpu_instance, mi.compute_instance)
                 : mi.uuid;
      d.gpu = index;
      d.mig = static_cast<int>(m);
      d.memory_mib = mi.memory_mib;
      d.numa_nodes = numa_of(g);  // a MIG device sits where its GPU sits
      const std::string name = config.mig_strategy == MigStrategy::kSingle
                                   ? "nvidia.com/gpu"
                                   : mig::mixed_resource_name(mi.profile);
      resource(name, Vendor::kNvidia).physical.push_back(std::move(d));
    }
  }
  for (auto& r : base) add_unshared(r);

  if (config.sharing == SharingKind::kNone) return base;
  std::vector<Resource> out;
  for (auto& r : base) {
    const auto entry =
        std::find_if(config.replicated.resources.begin(), config.replicated.resources.end(),
                     [&](const ReplicaResource& e) { return e.name == r.name; });
    if (entry == config.replicated.resources.end()) {
      out.push_back(std::move(r));
      continue;
    }
    out.push_back(apply_sharing(std::move(r), config, *entry));
  }
  for (const auto& r : out) {
    if (r.name.size() > 63) {
      base::fail_input(fmt::format("resource name '{}' is longer than 63 characters", r.name));
    }
  }
  return out;
}

}  // namespace gpuorch::k8s

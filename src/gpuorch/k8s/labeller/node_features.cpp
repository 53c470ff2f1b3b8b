#include "gpuorch/k8s/labeller/node_features.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "gpuorch/k8s/deviceplugin/resources.hpp"
#include "gpuorch/mig/profiles.hpp"

namespace gpuorch::k8s {
namespace {

using topology::Host;

// One GFD label group: the devices of one resource as GFD names it before any rename
// (`nvidia.com/gpu`, or `nvidia.com/mig-<profile>` under the mixed strategy).
struct Group {
  std::set<std::string> devices;  // physical ids: replicas of one GPU count once
  const PhysicalDevice* first = nullptr;
  int replicas = 1;
  SharingKind sharing = SharingKind::kNone;
  bool renamed = false;  // the shared resource has another name, so the product keeps its own
};

const topology::MigInstance* mig_of(const Host& h, const PhysicalDevice& d) {
  if (d.mig < 0) return nullptr;
  return &h.gpus[static_cast<std::size_t>(d.gpu)].mig.instances[static_cast<std::size_t>(d.mig)];
}

std::string group_prefix(const Host& h, const PhysicalDevice& d, MigStrategy strategy) {
  const auto* mi = mig_of(h, d);
  if (mi == nullptr || strategy == MigStrategy::kSingle) return "nvidia.com/gpu";
  return mig::mixed_resource_name(mi->profile);
}

// Group::first points into `plan`, which must outlive the groups.
std::map<std::string, Group> groups_of(const Host& h, const std::vector<Resource>& plan,
                                       MigStrategy strategy) {
  std::map<std::string, Group> groups;
  for (const auto& r : plan) {
    for (const auto& d : r.physical) {
      const std::string prefix = group_prefix(h, d, strategy);
      Group& g = groups[prefix];
      g.devices.insert(d.id);
      if (g.first == nullptr) g.first = &d;
      if (r.sharing != SharingKind::kNone && r.replicas > 1) {
        g.replicas = std::max(g.replicas, r.replicas);
        g.sharing = r.sharing;
        g.renamed = g.renamed || r.name != prefix;
      }
    }
  }
  return groups;
}

void resource_labels(const Host& h, const PluginConfig& config,
                     std::map<std::string, std::string>& out) {
  const auto plan = plan_resources(h, config, VendorFilter::kNvidia);
  const auto groups = groups_of(h, plan, config.mig_strategy);
  for (const auto& [prefix, g] : groups) {
    const auto& gpu = h.gpus[static_cast<std::size_t>(g.first->gpu)];
    const auto* mi = mig_of(h, *g.first);
    std::string product = gpu.model;
    if (mi != nullptr) product += "-MIG-" + mi->profile;
    // GFD marks a replicated resource that kept its name, so selectors can tell shared GPUs.
    if (g.replicas > 1 && !g.renamed) product += "-SHARED";
    out[prefix + ".product"] = topology::label_value(product);
    out[prefix + ".count"] = std::to_string(g.devices.size());
    out[prefix + ".replicas"] = std::to_string(g.replicas);
    out[prefix + ".sharing-strategy"] = to_string(g.sharing);
    const std::int64_t memory = mi != nullptr ? mi->memory_mib : gpu.memory_mib;
    if (memory > 0) out[prefix + ".memory"] = std::to_string(memory);
    if (mi == nullptr) continue;
    if (const auto& a = mi->attributes) {
      // What NVML says of the device, as GFD reads it (nvmlDeviceGetAttributes).
      out[prefix + ".multiprocessors"] = std::to_string(a->multiprocessors);
      out[prefix + ".slices.gi"] = std::to_string(a->gpu_instance_slices);
      out[prefix + ".slices.ci"] = std::to_string(a->compute_instance_slices);
      out[prefix + ".engines.copy"] = std::to_string(a->copy_engines);
      out[prefix + ".engines.decoder"] = std::to_string(a->decoders);
      out[prefix + ".engines.encoder"] = std::to_string(a->encoders);
      out[prefix + ".engines.jpeg"] = std::to_string(a->jpeg_engines);
      out[prefix + ".engines.ofa"] = std::to_string(a->ofa_engines);
      continue;
    }
    // Without NVML's attributes (procfs-only hosts, older recordings) the slices still follow from
    // the MIG geometry: a registered MIG device's one compute instance spans its GPU instance.
    const auto* model = mig::model_for_gpu(gpu.model, gpu.memory_mib);
    if (const auto* p = model != nullptr ? model->profile(mi->profile) : nullptr) {
      out[prefix + ".slices.gi"] = std::to_string(p->compute_slices);
      out[prefix + ".slices.ci"] = std::to_string(p->compute_slices);
    }
  }
}

void nvidia_labels(const Host& h, const PluginConfig& config,
                   std::map<std::string, std::string>& out) {
  // topology::node_labels describes an unshared node without MIG devices; the plan says what
  // the device plugin really advertises.
  for (const char* k : {"count", "product", "memory", "replicas", "sharing-strategy"}) {
    out.erase(fmt::format("nvidia.com/gpu.{}", k));
  }
  resource_labels(h, config, out);
  bool mps = false;
  for (const auto& [k, v] : out) {
    mps = mps || (k.ends_with(".sharing-strategy") && v == to_string(SharingKind::kMps));
  }
  out["nvidia.com/mps.capable"] = mps ? "true" : "false";
  out["nvidia.com/mig.strategy"] = to_string(config.mig_strategy);
}

}  // namespace

std::vector<std::vector<int>> nvlink_islands(const Host& h) {
  const int n = static_cast<int>(h.gpus.size());
  std::vector<int> parent(static_cast<std::size_t>(n));
  std::iota(parent.begin(), parent.end(), 0);
  const auto root = [&parent](int x) {
    while (parent[static_cast<std::size_t>(x)] != x) x = parent[static_cast<std::size_t>(x)];
    return x;
  };
  for (const auto& l : h.links) {
    if (l.b >= n || (l.path != topology::Path::kNvLink && l.path != topology::Path::kXgmi)) {
      continue;
    }
    const int ra = root(l.a), rb = root(l.b);
    parent[static_cast<std::size_t>(std::max(ra, rb))] = std::min(ra, rb);
  }
  std::map<int, std::vector<int>> by_root;
  for (int i = 0; i < n; ++i) by_root[root(i)].push_back(i);
  std::vector<std::vector<int>> out;
  for (auto& [r, members] : by_root) out.push_back(std::move(members));
  return out;
}

NodeFeatures node_features(const Host& h, const PluginConfig& config) {
  std::map<std::string, std::string> labels;
  for (auto& [k, v] : topology::node_labels(h)) labels[k] = std::move(v);
  const bool nvidia = std::any_of(h.gpus.begin(), h.gpus.end(), [](const topology::Gpu& g) {
    return g.vendor == topology::Vendor::kNvidia;
  });
  if (nvidia) nvidia_labels(h, config, labels);
  NodeFeatures f;
  if (!h.gpus.empty()) {
    const auto islands = nvlink_islands(h);
    std::size_t largest = 0;
    for (const auto& i : islands) largest = std::max(largest, i.size());
    labels["gpuorch.io/nvlink.islands"] = std::to_string(islands.size());
    labels["gpuorch.io/nvlink.largest-island"] = std::to_string(largest);
    f.annotations.emplace_back(kTopologyAnnotation, topology_annotation(h, islands));
  }
  f.labels.assign(labels.begin(), labels.end());
  return f;
}

}  // namespace gpuorch::k8s

#include "gpuorch/k8s/mirror/dra_devices.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <tuple>

#include "gpuorch/k8s/api/object_fields.hpp"
#include "gpuorch/k8s/api/quantity.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"
#include "gpuorch/topology/link_scores.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

// The link classes of topology/link_scores.hpp a pair of GPUs gets from what the driver
// publishes: one NVLink domain is NVLink (counted as one link: the slice says that they are
// connected, not by how many), one PCIe root is PHB, one NUMA node NODE, else SYS.
constexpr int kSameDomainClass = topology::kNvLinkClassBase + 1;
constexpr int kSamePcieRootClass = 15;
constexpr int kSameNumaClass = 10;
constexpr int kSystemClass = 5;

std::string qualify(const std::string& name, const std::string& driver) {
  return name.find('/') == std::string::npos ? driver + "/" + name : name;
}

const DeviceAttribute* attribute(const DraDevice& d, const char* qualified) {
  const auto it = d.view.attributes.find(qualified);
  return it == d.view.attributes.end() ? nullptr : &it->second;
}

std::optional<std::int64_t> int_attribute(const DraDevice& d, const char* qualified) {
  const DeviceAttribute* a = attribute(d, qualified);
  if (a == nullptr || !std::holds_alternative<std::int64_t>(*a)) return std::nullopt;
  return std::get<std::int64_t>(*a);
}

std::string string_attribute(const DraDevice& d, const char* qualified) {
  const DeviceAttribute* a = attribute(d, qualified);
  return a != nullptr && std::holds_alternative<std::string>(*a) ? std::get<std::string>(*a) : "";
}

std::uint8_t link_score(const DraDevice& a, const DraDevice& b) {
  const auto da = int_attribute(a, "gpu.gpuorch.io/nvlinkDomain");
  const auto db = int_attribute(b, "gpu.gpuorch.io/nvlinkDomain");
  const auto na = int_attribute(a, "gpu.gpuorch.io/numaNode");
  const auto nb = int_attribute(b, "gpu.gpuorch.io/numaNode");
  const std::string ra = string_attribute(a, "resource.kubernetes.io/pcieRoot");
  const std::string rb = string_attribute(b, "resource.kubernetes.io/pcieRoot");
  const bool same_numa = na && nb && *na == *nb;
  int link_class = kSystemClass;
  if (da && db && *da == *db) {
    link_class = kSameDomainClass;
  } else if (!ra.empty() && ra == rb) {
    link_class = kSamePcieRootClass;
  } else if (same_numa) {
    link_class = kSameNumaClass;
  }
  return static_cast<std::uint8_t>(2 * link_class + (same_numa ? 1 : 0));
}

}  // namespace

DraDevice dra_device(const json& device, const std::string& driver, const std::string& pool) {
  DraDevice d;
  d.pool = pool;
  d.name = str(device, "name");
  if (d.name.empty()) throw std::invalid_argument("a device without a name");
  d.view.driver = driver;
  const json& attributes = field(device, "attributes");
  if (attributes.is_object()) {
    for (const auto& [name, value] : attributes.items()) {
      const std::string q = qualify(name, driver);
      if (const json& i = field(value, "int"); i.is_number_integer()) {
        d.view.attributes[q] = i.get<std::int64_t>();
      } else if (const json& b = field(value, "bool"); b.is_boolean()) {
        d.view.attributes[q] = b.get<bool>();
      } else if (const json& s = field(value, "string"); s.is_string()) {
        d.view.attributes[q] = s.get<std::string>();
      } else if (const json& v = field(value, "version"); v.is_string()) {
        SemVer sv;
        if (!parse_semver(v.get<std::string>(), sv)) {
          throw std::invalid_argument(fmt::format("device {}: attribute {}: version '{}'", d.name,
                                                  q, v.get<std::string>()));
        }
        d.view.attributes[q] = sv;
      }
    }
  }
  const json& capacity = field(device, "capacity");
  if (capacity.is_object()) {
    for (const auto& [name, value] : capacity.items()) {
      const auto milli = quantity_milli(str(value, "value"));
      if (!milli) {
        throw std::invalid_argument(
            fmt::format("device {}: capacity {}: not a quantity", d.name, name));
      }
      d.view.capacity_milli[qualify(name, driver)] = *milli;
    }
  }
  return d;
}

bool DraInventory::update_slice(const json& slice, bool deleted) {
  const std::string name = object_name(slice);
  if (name.empty()) return false;
  std::string old_node;
  if (const auto it = slices_.find(name); it != slices_.end()) old_node = it->second.node;
  slices_.erase(name);
  std::string node;
  if (!deleted) {
    const json& spec = field(slice, "spec");
    Slice s;
    s.node = str(spec, "nodeName");
    s.driver = str(spec, "driver");
    s.pool = str(field(spec, "pool"), "name");
    const json& generation = field(field(spec, "pool"), "generation");
    s.generation = generation.is_number_integer() ? generation.get<std::int64_t>() : 0;
    const json& devices = field(spec, "devices");
    bool good = !s.node.empty() && !s.driver.empty() && !s.pool.empty();
    if (good && devices.is_array()) {
      try {
        for (const json& d : devices) s.devices.push_back(dra_device(d, s.driver, s.pool));
      } catch (const std::invalid_argument&) {
        good = false;  // a device the API would not have taken: the slice is left out whole
      }
    }
    if (good) {
      node = s.node;
      slices_.emplace(name, std::move(s));
    }
  }
  if (!old_node.empty()) rebuild(old_node);
  if (!node.empty() && node != old_node) rebuild(node);
  return !old_node.empty() || !node.empty();
}

void DraInventory::rebuild(const std::string& node) {
  // Only the newest generation of each pool counts (older slices are on their way out).
  std::map<std::pair<std::string, std::string>, std::int64_t> newest;
  for (const auto& [name, s] : slices_) {
    if (s.node != node) continue;
    auto& g = newest[{s.driver, s.pool}];
    g = std::max(g, s.generation);
  }
  DraNode out;
  for (const auto& [name, s] : slices_) {
    if (s.node != node || s.generation != newest[{s.driver, s.pool}]) continue;
    out.devices.insert(out.devices.end(), s.devices.begin(), s.devices.end());
  }
  if (out.devices.empty()) {
    nodes_.erase(node);
    return;
  }
  std::vector<std::size_t> gpus;
  std::vector<std::size_t> instances;
  for (std::size_t i = 0; i < out.devices.size(); ++i) {
    const DraDevice& d = out.devices[i];
    if (d.view.driver != kGpuDraDriver) continue;
    const std::string type = string_attribute(d, "gpu.gpuorch.io/type");
    if (type == "gpu") gpus.push_back(i);
    if (type == "mig") instances.push_back(i);
  }
  // GPU indices follow the driver's index attribute (NVML's), then the device name; MIG
  // instances come after, by their GPU's index, then name.
  const auto by = [&](const char* attribute) {
    return [&out, attribute](std::size_t a, std::size_t b) {
      const DraDevice& x = out.devices[a];
      const DraDevice& y = out.devices[b];
      return std::tuple(int_attribute(x, attribute).value_or(INT64_MAX), x.name) <
             std::tuple(int_attribute(y, attribute).value_or(INT64_MAX), y.name);
    };
  };
  std::sort(gpus.begin(), gpus.end(), by("gpu.gpuorch.io/index"));
  std::sort(instances.begin(), instances.end(), by("gpu.gpuorch.io/parentIndex"));
  out.whole_gpus = static_cast<int>(gpus.size());
  gpus.insert(gpus.end(), instances.begin(), instances.end());
  out.gpu_count = static_cast<int>(gpus.size());
  for (std::size_t g = 0; g < gpus.size(); ++g) out.devices[gpus[g]].gpu = static_cast<int>(g);
  if (!gpus.empty()) {
    const DraDevice& first = out.devices[gpus.front()];
    out.gpu_model = string_attribute(first, "gpu.gpuorch.io/productName");
    std::replace(out.gpu_model.begin(), out.gpu_model.end(), ' ', '-');  // as GFD's label
    if (out.gpu_model.empty()) out.gpu_model = "gpu";
    const auto memory = first.view.capacity_milli.find("gpu.gpuorch.io/memory");
    if (memory != first.view.capacity_milli.end()) {
      out.gpu_memory_mib = memory->second / 1000 / (1024 * 1024);
    }
    // A MIG instance is a slice of a GPU, not a peer to place work next to: unlinked (0), so
    // free instances never pull a whole-GPU request's choice towards their GPU's domain.
    const auto whole = static_cast<std::size_t>(out.whole_gpus);
    out.gpu_links.assign(gpus.size() * gpus.size(), 0);
    for (std::size_t a = 0; a < whole; ++a) {
      for (std::size_t b = 0; b < whole; ++b) {
        if (a != b) {
          out.gpu_links[a * gpus.size() + b] =
              link_score(out.devices[gpus[a]], out.devices[gpus[b]]);
        }
      }
    }
  }
  nodes_[node] = std::move(out);
}

bool DraInventory::apply(cluster::NodeSpec& node, bool mig_instances) const {
  const DraNode* d = this->node(node.name);
  const int count = d == nullptr ? 0 : (mig_instances ? d->gpu_count : d->whole_gpus);
  if (count == 0 || node.gpu_count > 0) return false;
  node.gpu_count = count;
  node.gpu_model = d->gpu_model;
  node.gpu_memory_mib = d->gpu_memory_mib;
  // Whole GPUs come first: their links are the matrix's top-left block.
  const auto n = static_cast<std::size_t>(count);
  const auto all = static_cast<std::size_t>(d->gpu_count);
  node.gpu_links.assign(n * n, 0);
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) node.gpu_links[a * n + b] = d->gpu_links[a * all + b];
  }
  return true;
}

const DraNode* DraInventory::node(const std::string& name) const {
  const auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : &it->second;
}

std::optional<std::pair<std::string, int>> DraInventory::gpu_of(const std::string& driver,
                                                                const std::string& pool,
                                                                const std::string& device) const {
  for (const auto& [name, n] : nodes_) {
    for (const DraDevice& d : n.devices) {
      if (d.gpu >= 0 && d.view.driver == driver && d.pool == pool && d.name == device) {
        return std::pair(name, d.gpu);
      }
    }
  }
  return std::nullopt;
}

}  // namespace gpuorch::k8s

#include "gpuorch/k8s/dra/resource_slice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "gpuorch/base/error.hpp"
#include "gpuorch/k8s/api/api_path.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;

// The API's limits on one attribute value (resource.k8s.io validation): a longer string is
// refused, so the slice would not publish at all; a name is better cut than the node left out.
constexpr std::size_t kMaxStringAttribute = 64;

json string_attribute(const std::string& s) {
  return json{{"string", s.substr(0, kMaxStringAttribute)}};
}
json int_attribute(std::int64_t v) { return json{{"int", v}}; }
json version_attribute(const std::string& v) { return json{{"version", v}}; }

// Attributes every device of a GPU carries, the whole GPU's or a MIG instance's: where it sits
// (PCIe root, NUMA node, NVLink domain) is the parent GPU's.
void add_placement(json& a, const topology::Gpu& g, int nvlink_domain, const topology::Host& host) {
  a["productName"] = string_attribute(g.model);
  a["vendor"] = string_attribute(topology::to_string(g.vendor));
  if (g.cc_major >= 0) {
    a["cudaComputeCapability"] =
        version_attribute(fmt::format("{}.{}.0", g.cc_major, std::max(g.cc_minor, 0)));
  }
  if (const auto v = semantic_version(host.driver_version); !v.empty()) {
    a["driverVersion"] = version_attribute(v);
  }
  if (host.cuda_driver_version > 0) {
    a["cudaDriverVersion"] = version_attribute(fmt::format(
        "{}.{}.0", host.cuda_driver_version / 1000, host.cuda_driver_version % 1000 / 10));
  }
  // The standard attributes (resource.kubernetes.io/...) that other drivers' devices carry too,
  // so a claim can align a GPU with a NIC on the same PCIe root.
  if (!g.pci.host_bridge.empty()) {
    a["resource.kubernetes.io/pcieRoot"] = string_attribute(g.pci.host_bridge);
  }
  if (!g.pci.address.empty()) {
    a["resource.kubernetes.io/pciBusID"] = string_attribute(g.pci.address);
  }
  if (g.numa_node >= 0) a["numaNode"] = int_attribute(g.numa_node);
  if (nvlink_domain >= 0) a["nvlinkDomain"] = int_attribute(nvlink_domain);
}

json gpu_device(const topology::Host& host, const topology::Gpu& g, const std::string& name,
                int nvlink_domain) {
  json a = json::object();
  a["type"] = string_attribute("gpu");
  a["index"] = int_attribute(g.index);
  if (!g.uuid.empty()) a["uuid"] = string_attribute(g.uuid);
  if (g.minor >= 0) a["minor"] = int_attribute(g.minor);
  add_placement(a, g, nvlink_domain, host);
  json d{{"name", name}, {"attributes", a}};
  if (g.memory_mib > 0) {
    d["capacity"] = json{{"memory", {{"value", fmt::format("{}Mi", g.memory_mib)}}}};
  }
  return d;
}

json mig_device(const topology::Host& host, const topology::Gpu& g, const topology::MigInstance& m,
                const std::string& name, int nvlink_domain) {
  json a = json::object();
  a["type"] = string_attribute("mig");
  a["parentIndex"] = int_attribute(g.index);
  if (!g.uuid.empty()) a["parentUUID"] = string_attribute(g.uuid);
  if (!m.uuid.empty()) a["uuid"] = string_attribute(m.uuid);
  if (!m.profile.empty()) a["profile"] = string_attribute(m.profile);
  a["gpuInstance"] = int_attribute(m.gpu_instance);
  a["computeInstance"] = int_attribute(m.compute_instance);
  add_placement(a, g, nvlink_domain, host);
  json d{{"name", name}, {"attributes", a}};
  if (m.memory_mib > 0) {
    d["capacity"] = json{{"memory", {{"value", fmt::format("{}Mi", m.memory_mib)}}}};
  }
  return d;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<SliceDevice> slice_devices(const topology::Host& host) {
  std::vector<SliceDevice> out;
  for (std::size_t i = 0; i < host.gpus.size(); ++i) {
    const auto& g = host.gpus[i];
    const int gi = static_cast<int>(i);
    if (g.mig.enabled && !g.mig.instances.empty()) {
      for (std::size_t m = 0; m < g.mig.instances.size(); ++m) {
        const auto& inst = g.mig.instances[m];
        out.push_back({fmt::format("gpu-{}-mig-{}-{}", g.index, std::max(inst.gpu_instance, 0),
                                   std::max(inst.compute_instance, 0)),
                       gi, static_cast<int>(m)});
      }
    } else {
      out.push_back({fmt::format("gpu-{}", g.index), gi, -1});
    }
  }
  return out;
}

std::string slice_name(const SliceOptions& o) {
  if (!is_dns1123_subdomain(o.node_name)) {
    base::fail_input(fmt::format(
        "node name '{}' is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')",
        o.node_name));
  }
  std::string name = o.node_name + "-" + o.driver;
  if (!is_dns1123_subdomain(name)) {
    base::fail_input(fmt::format("ResourceSlice name '{}' is not a DNS-1123 subdomain", name));
  }
  return name;
}

json resource_slice(const topology::Host& host, const SliceOptions& o) {
  const std::vector<int> domains = nvlink_domains(host);
  json devices = json::array();
  for (const auto& d : slice_devices(host)) {
    const auto& g = host.gpus[static_cast<std::size_t>(d.gpu)];
    const int domain = domains[static_cast<std::size_t>(d.gpu)];
    devices.push_back(d.mig < 0
                          ? gpu_device(host, g, d.name, domain)
                          : mig_device(host, g, g.mig.instances[static_cast<std::size_t>(d.mig)],
                                       d.name, domain));
  }
  json spec{
      {"driver", o.driver},
      {"pool", {{"name", o.node_name}, {"generation", o.generation}, {"resourceSliceCount", 1}}},
      {"nodeName", o.node_name},
      {"devices", devices}};
  return json{{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "ResourceSlice"},
              {"metadata", {{"name", slice_name(o)}}},
              {"spec", spec}};
}

std::string semantic_version(const std::string& dotted) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const auto dot = dotted.find('.', start);
    parts.push_back(dotted.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (parts.size() > 3) return {};
  while (parts.size() < 3) parts.emplace_back("0");
  std::string out;
  for (auto& p : parts) {
    if (!all_digits(p) || p.size() > 9) return {};
    p.erase(0, std::min(p.find_first_not_of('0'), p.size() - 1));  // "05" -> "5", "0" stays
    out += (out.empty() ? "" : ".") + p;
  }
  return out;
}

std::vector<int> nvlink_domains(const topology::Host& host) {
  const std::size_t n = host.gpus.size();
  std::vector<std::size_t> parent(n);
  std::iota(parent.begin(), parent.end(), std::size_t{0});
  const auto root = [&parent](std::size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  std::vector<bool> linked(n, false);
  for (const auto& l : host.links) {
    const auto a = static_cast<std::size_t>(l.a), b = static_cast<std::size_t>(l.b);
    if (a >= n || b >= n) continue;  // a NIC
    if (l.path != topology::Path::kNvLink && l.path != topology::Path::kXgmi) continue;
    linked[a] = linked[b] = true;
    parent[std::max(root(a), root(b))] = std::min(root(a), root(b));
  }
  std::vector<int> out(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    if (linked[i]) out[i] = host.gpus[root(i)].index;
  }
  return out;
}

}  // namespace gpuorch::k8s::dra

#include "gpuorch/discover/hwloc_topology.hpp"

#include <fmt/format.h>
#include <hwloc.h>
#include <hwloc/export.h>

#include <algorithm>
#include <map>

#include "gpuorch/discover/pci.hpp"

namespace gpuorch::discover {

struct HwlocTopology::Impl {
  hwloc_topology_t topo = nullptr;
  ~Impl() {
    if (topo) hwloc_topology_destroy(topo);
  }
};

namespace {

topology::IdSet ids_of(hwloc_const_bitmap_t set) {
  topology::IdSet out;
  if (!set || hwloc_bitmap_iszero(set)) return out;
  if (hwloc_bitmap_weight(set) < 0) return out;  // infinite set
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) out.push_back(i);
  return out;
}

std::string address_of(hwloc_obj_t o) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", o->attr->pcidev.domain, o->attr->pcidev.bus,
                     o->attr->pcidev.dev, o->attr->pcidev.func);
}

hwloc_obj_t find_pci(hwloc_topology_t topo, const std::string& address) {
  unsigned domain = 0, bus = 0, dev = 0, func = 0;
  if (std::sscanf(address.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &func) != 4) return nullptr;
  return hwloc_get_pcidev_by_busid(topo, domain, bus, dev, func);
}

std::unique_ptr<HwlocTopology::Impl> load(const std::string* xml, std::string& why) {
  auto impl = std::make_unique<HwlocTopology::Impl>();
  if (hwloc_topology_init(&impl->topo) != 0) {
    impl->topo = nullptr;
    why = "hwloc_topology_init failed";
    return nullptr;
  }
  // Keep bridges and every PCI device: the tree is what classifies PIX/PXB/PHB.
  hwloc_topology_set_io_types_filter(impl->topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (xml && hwloc_topology_set_xml(impl->topo, xml->c_str()) != 0) {
    why = "not loadable as hwloc XML";
    return nullptr;
  }
  if (hwloc_topology_load(impl->topo) != 0) {
    why = xml ? "not a valid hwloc XML topology" : "hwloc_topology_load failed";
    return nullptr;
  }
  return impl;
}

}  // namespace

HwlocTopology::HwlocTopology(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HwlocTopology::~HwlocTopology() = default;

std::unique_ptr<HwlocTopology> HwlocTopology::live(std::string& why) {
  auto impl = load(nullptr, why);
  if (!impl) return nullptr;
  return std::unique_ptr<HwlocTopology>(new HwlocTopology(std::move(impl)));
}

std::unique_ptr<HwlocTopology> HwlocTopology::from_xml(const std::string& path, std::string& why) {
  auto impl = load(&path, why);
  if (!impl) return nullptr;
  return std::unique_ptr<HwlocTopology>(new HwlocTopology(std::move(impl)));
}

void HwlocTopology::fill_cpus(topology::Host& host) const {
  hwloc_topology_t t = impl_->topo;
  const int pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  const int cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  const int packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  if (pus > 0) {
    host.logical_cpus = pus;
    host.online_cpus = ids_of(hwloc_topology_get_topology_cpuset(t));
  }
  if (cores > 0) host.cores = cores;
  if (packages > 0) host.packages = packages;
  std::map<int, topology::NumaNode> nodes;
  for (const auto& n : host.numa_nodes) nodes[n.id] = n;
  const int count = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < count; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    auto& node = nodes[static_cast<int>(o->os_index)];
    node.id = static_cast<int>(o->os_index);
    node.cpus = ids_of(o->cpuset);
    if (o->attr && o->attr->numanode.local_memory > 0) {
      node.memory_mib = static_cast<std::int64_t>(o->attr->numanode.local_memory >> 20);
    }
  }
  if (count > 0) {
    host.numa_nodes.clear();
    for (auto& [id, node] : nodes) {
      if (node.distances.size() != static_cast<std::size_t>(count)) node.distances.clear();
      host.numa_nodes.push_back(std::move(node));
    }
  }
}

std::optional<topology::PciLocation> HwlocTopology::pci(const std::string& address) const {
  hwloc_obj_t o = find_pci(impl_->topo, address);
  if (!o) return std::nullopt;
  topology::PciLocation loc;
  loc.address = address;
  std::vector<std::string> up;
  for (hwloc_obj_t p = o->parent; p && p->type == HWLOC_OBJ_BRIDGE; p = p->parent) {
    if (p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
      // hwloc's host bridge stands for the root bus sysfs calls pciDDDD:BB.
      loc.host_bridge = fmt::format("pci{:04x}:{:02x}", p->attr->bridge.downstream.pci.domain,
                                    p->attr->bridge.downstream.pci.secondary_bus);
      break;
    }
    up.push_back(address_of(p));
  }
  loc.bridges.assign(up.rbegin(), up.rend());
  loc.known = !loc.host_bridge.empty();
  return loc;
}

topology::IdSet HwlocTopology::local_cpus(const std::string& address) const {
  hwloc_obj_t o = find_pci(impl_->topo, address);
  if (!o) return {};
  hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(impl_->topo, o);
  return a ? ids_of(a->cpuset) : topology::IdSet{};
}

int HwlocTopology::numa_node(const std::string& address) const {
  hwloc_obj_t o = find_pci(impl_->topo, address);
  if (!o) return -1;
  hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(impl_->topo, o);
  if (!a || !a->nodeset || hwloc_bitmap_weight(a->nodeset) != 1) return -1;
  return hwloc_bitmap_first(a->nodeset);
}

std::optional<std::string> HwlocTopology::export_xml() const {
  char* buf = nullptr;
  int len = 0;
  if (hwloc_topology_export_xmlbuffer(impl_->topo, &buf, &len, 0) != 0 || !buf) {
    return std::nullopt;
  }
  std::string out(buf, static_cast<std::size_t>(len > 0 ? len - 1 : 0));
  hwloc_free_xmlbuffer(impl_->topo, buf);
  return out;
}

}  // namespace gpuorch::discover

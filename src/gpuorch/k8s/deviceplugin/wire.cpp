#include "gpuorch/k8s/deviceplugin/wire.hpp"

namespace gpuorch::k8s {

v1beta1::ListAndWatchResponse device_list(const topology::Host& host, const Resource& r,
                                          const HealthState& health) {
  v1beta1::ListAndWatchResponse out;
  for (const auto& d : r.devices) {
    const auto& phys = r.physical[static_cast<std::size_t>(d.physical)];
    auto* dev = out.add_devices();
    dev->set_id(d.id);
    dev->set_health(health.healthy(host, phys) ? kHealthy : kUnhealthy);
    if (!phys.numa_nodes.empty()) {
      auto* topo = dev->mutable_topology();
      for (const auto n : phys.numa_nodes) topo->add_nodes()->set_id(n);
    }
  }
  return out;
}

void to_proto(const ContainerAllocation& a, v1beta1::ContainerAllocateResponse& out) {
  for (const auto& [k, v] : a.envs) (*out.mutable_envs())[k] = v;
  for (const auto& m : a.mounts) {
    auto* pm = out.add_mounts();
    pm->set_container_path(m.container_path);
    pm->set_host_path(m.host_path);
    pm->set_read_only(m.read_only);
  }
  for (const auto& d : a.devices) {
    auto* pd = out.add_devices();
    pd->set_container_path(d.container_path);
    pd->set_host_path(d.host_path);
    pd->set_permissions(d.permissions);
  }
  for (const auto& [k, v] : a.annotations) (*out.mutable_annotations())[k] = v;
  for (const auto& c : a.cdi_devices) out.add_cdi_devices()->set_name(c);
}

}  // namespace gpuorch::k8s

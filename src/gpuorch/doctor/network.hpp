#pragma once
// `gpuorch doctor network`: what NCCL needs from a host to use its RDMA network, read from sysfs
// and procfs (the live host or a recorded tree, `--sysfs-root`): RDMA ports as ibv_devinfo shows
// them, GPUDirect RDMA's kernel module, the memlock limit, and NCCL's environment naming devices
// that exist.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/discover/tree.hpp"
#include "gpuorch/doctor/finding.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::doctor {

struct NetInterface {
  std::string name, operstate;  // "up", "down", "unknown"
};

struct NetworkState {
  std::vector<topology::Nic> rdma;
  std::vector<NetInterface> interfaces;  // /sys/class/net
  std::optional<std::vector<std::string>> modules;  // /proc/modules names; nullopt: unreadable
  bool nvidia_driver = false;                       // nvidia module loaded or GPUs under sysfs
  // "Max locked memory" of /proc/self/limits, in bytes; nullopt = unlimited.
  std::optional<std::optional<long long>> memlock_soft;  // outer nullopt: not readable
  std::map<std::string, std::string> env;                // NCCL_* / RCCL_* the job would get
  std::string env_source;                                // "environment", "env file x", ...
};

NetworkState read_network_state(const discover::Tree& tree);
std::vector<Finding> check_network(const NetworkState& s);

}  // namespace gpuorch::doctor

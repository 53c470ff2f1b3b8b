// Reading the network side of a host from a Tree, so a recording replays exactly what the live
// host showed.
#include <sstream>

#include "gpuorch/base/whole_number.hpp"
#include "gpuorch/discover/devices.hpp"
#include "gpuorch/doctor/network.hpp"

namespace gpuorch::doctor {
namespace {

// "Max locked memory         8388608              8388608              bytes"
std::optional<std::optional<long long>> memlock(const discover::Tree& tree) {
  const auto text = tree.text("proc/self/limits");
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Max locked memory", 0) != 0) continue;
    std::istringstream fields(line.substr(17));
    std::string soft;
    fields >> soft;
    if (soft == "unlimited") return std::optional<long long>{};
    if (const auto v = base::whole_number<long long>(soft)) return std::optional<long long>{*v};
    tree.problem("proc/self/limits", "unreadable 'Max locked memory' value " + soft);
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

NetworkState read_network_state(const discover::Tree& tree) {
  NetworkState s;
  topology::Host host;
  discover::find_rdma_nics(tree, host);
  s.rdma = std::move(host.nics);
  for (const auto& name : tree.list("sys/class/net")) {
    s.interfaces.push_back(
        {name, tree.line("sys/class/net/" + name + "/operstate").value_or("unknown")});
  }
  if (const auto text = tree.text("proc/modules")) {
    std::vector<std::string> names;
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      std::string name;
      if (fields >> name) names.push_back(name);
    }
    s.modules = std::move(names);
  }
  if (s.modules) {
    for (const auto& m : *s.modules) s.nvidia_driver = s.nvidia_driver || m == "nvidia";
  }
  s.nvidia_driver = s.nvidia_driver || tree.exists("proc/driver/nvidia/gpus");
  s.memlock_soft = memlock(tree);
  return s;
}

}  // namespace gpuorch::doctor

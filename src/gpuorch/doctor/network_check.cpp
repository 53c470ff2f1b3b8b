#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "gpuorch/doctor/nccl_name_list.hpp"
#include "gpuorch/doctor/network.hpp"

namespace gpuorch::doctor {
namespace {

std::string port_name(const topology::Nic& nic, const topology::NicPort& p) {
  return fmt::format("{} port {}", nic.name, p.port);
}

std::string port_line(const topology::Nic& nic, const topology::NicPort& p) {
  return fmt::format("{}: {} {} {:g} Gb/s {}", port_name(nic, p), p.state, p.phys_state,
                     p.rate_gbps, p.link_layer);
}

void ports(const NetworkState& s, std::vector<Finding>& out) {
  if (s.rdma.empty()) {
    out.push_back({Severity::kInfo, "net.rdma",
                   "no RDMA device: NCCL uses TCP sockets between hosts",
                   "/sys/class/infiniband is empty or absent", ""});
    return;
  }
  std::vector<std::string> all;
  std::map<std::string, double> best;  // link layer -> fastest active port
  for (const auto& nic : s.rdma) {
    for (const auto& p : nic.ports) {
      all.push_back(port_line(nic, p));
      if (p.state == "ACTIVE") best[p.link_layer] = std::max(best[p.link_layer], p.rate_gbps);
    }
  }
  out.push_back({Severity::kInfo, "net.rdma",
                 fmt::format("{} RDMA device(s)", s.rdma.size()),
                 fmt::format("{}", fmt::join(all, "; ")), ""});
  for (const auto& nic : s.rdma) {
    for (const auto& p : nic.ports) {
      if (p.state != "ACTIVE") {
        const bool ib = p.link_layer == "InfiniBand";
        out.push_back(
            {Severity::kWarning, "net.port-down",
             fmt::format("{} is {}, so NCCL cannot use it", port_name(nic, p),
                         p.state.empty() ? "in an unknown state" : p.state),
             port_line(nic, p),
             p.state == "INIT" && ib
                 ? "no subnet manager has configured the port: start opensm or check the switch's SM"
                 : "check the cable and the switch port (`ibstat`, `ibv_devinfo`), or leave the "
                   "device out with NCCL_IB_HCA"});
        continue;
      }
      const double fastest = best[p.link_layer];
      if (p.rate_gbps > 0 && p.rate_gbps < fastest) {
        out.push_back({Severity::kWarning, "net.port-rate",
                       fmt::format("{} runs at {:g} Gb/s while the fastest {} port runs at {:g} "
                                   "Gb/s: the slowest rail sets NCCL's speed",
                                   port_name(nic, p), p.rate_gbps, p.link_layer, fastest),
                       port_line(nic, p),
                       "reseat or replace the cable/transceiver and check the switch port speed"});
      }
    }
  }
}

bool has_module(const NetworkState& s, std::initializer_list<const char*> names) {
  for (const auto& m : *s.modules) {
    for (const char* n : names) {
      if (m == n) return true;
    }
  }
  return false;
}

void gpudirect(const NetworkState& s, std::vector<Finding>& out) {
  if (s.rdma.empty() || !s.nvidia_driver || !s.modules) return;
  if (has_module(s, {"nvidia_peermem", "nv_peer_mem"})) {
    out.push_back({Severity::kInfo, "net.peermem", "GPUDirect RDMA module loaded",
                   "nvidia_peermem in /proc/modules", ""});
    return;
  }
  out.push_back({Severity::kWarning, "net.peermem-missing",
                 "GPUDirect RDMA is off: nvidia-peermem is not loaded, so NCCL stages network "
                 "data through host memory",
                 fmt::format("NVIDIA driver and {} RDMA device(s) present; neither nvidia_peermem "
                             "nor nv_peer_mem in /proc/modules",
                             s.rdma.size()),
                 "modprobe nvidia-peermem (it ships with the driver; add it to "
                 "/etc/modules-load.d), or use DMA-BUF (Linux >= 5.12, NCCL >= 2.13)"});
}

void memlock(const NetworkState& s, std::vector<Finding>& out) {
  if (!s.memlock_soft) return;
  if (!*s.memlock_soft) {
    out.push_back({Severity::kInfo, "net.memlock", "locked-memory limit unlimited",
                   "/proc/self/limits: Max locked memory unlimited", ""});
    return;
  }
  if (s.rdma.empty()) return;
  out.push_back({Severity::kWarning, "net.memlock",
                 "the locked-memory limit is capped: RDMA memory registration fails once it is used "
                 "up (NCCL WARN 'ibv_reg_mr failed')",
                 fmt::format("/proc/self/limits: Max locked memory {} bytes", **s.memlock_soft),
                 "ulimit -l unlimited (limits.conf memlock, systemd LimitMEMLOCK=infinity, docker "
                 "--ulimit memlock=-1)"});
}

std::string env_value(const NetworkState& s, const char* name) {
  const auto it = s.env.find(name);
  return it == s.env.end() ? std::string() : it->second;
}

void socket_ifname(const NetworkState& s, std::vector<Finding>& out) {
  const std::string value = env_value(s, "NCCL_SOCKET_IFNAME");
  if (value.empty()) return;
  const auto list = parse_name_list(value, false);
  std::vector<std::string> names;
  for (const auto& i : s.interfaces) names.push_back(i.name);
  const auto chosen = selected(*list, names);
  const std::string evidence =
      fmt::format("NCCL_SOCKET_IFNAME={} ({}); interfaces: {}", value, s.env_source,
                  names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
  if (chosen.empty()) {
    out.push_back({Severity::kError, "net.socket-ifname",
                   "NCCL_SOCKET_IFNAME selects no interface of this host: NCCL fails at init "
                   "(\"Bootstrap : no socket interface found\")",
                   evidence, "name an existing interface (`ip -br link`), e.g. =eth0 or a prefix"});
    return;
  }
  std::vector<std::string> down;
  for (const auto& i : s.interfaces) {
    if (std::find(chosen.begin(), chosen.end(), i.name) != chosen.end() && i.operstate == "down") {
      down.push_back(i.name);
    }
  }
  if (down.size() == chosen.size()) {
    out.push_back({Severity::kError, "net.socket-ifname",
                   fmt::format("every interface NCCL_SOCKET_IFNAME selects is down: {}",
                               fmt::join(down, ", ")),
                   evidence, "bring the interface up or name another one"});
  }
}

void ib_hca(const NetworkState& s, std::vector<Finding>& out) {
  const std::string value = env_value(s, "NCCL_IB_HCA");
  if (value.empty()) return;
  const std::string evidence_base = fmt::format("NCCL_IB_HCA={} ({})", value, s.env_source);
  const auto list = parse_name_list(value, true);
  if (!list) {
    out.push_back({Severity::kError, "net.ib-hca", "NCCL_IB_HCA is malformed", evidence_base,
                   "write it as mlx5_0:1,mlx5_1:1 (optional ^ to exclude, = for exact names)"});
    return;
  }
  std::vector<std::string> names;
  for (const auto& n : s.rdma) names.push_back(n.name);
  const std::string evidence =
      fmt::format("{}; RDMA devices: {}", evidence_base,
                  names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", ")));
  const auto chosen = selected(*list, names);
  if (chosen.empty()) {
    out.push_back({Severity::kError, "net.ib-hca",
                   "NCCL_IB_HCA selects no RDMA device of this host: NCCL falls back to sockets",
                   evidence, "name devices that `ibv_devinfo -l` lists"});
    return;
  }
  if (list->exclude) return;
  for (const auto& e : list->entries) {
    if (!e.port) continue;
    for (const auto& nic : s.rdma) {
      if (!selects(*list, e, nic.name)) continue;
      const bool has_port = std::any_of(nic.ports.begin(), nic.ports.end(),
                                        [&](const auto& p) { return p.port == *e.port; });
      if (!has_port) {
        out.push_back({Severity::kError, "net.ib-hca",
                       fmt::format("NCCL_IB_HCA names {} port {}, which does not exist", nic.name,
                                   *e.port),
                       evidence, "use the port numbers of /sys/class/infiniband/<dev>/ports"});
      }
    }
  }
}

void ib_disabled(const NetworkState& s, std::vector<Finding>& out) {
  if (env_value(s, "NCCL_IB_DISABLE") != "1") return;
  bool active = false;
  for (const auto& nic : s.rdma) {
    for (const auto& p : nic.ports) active = active || p.state == "ACTIVE";
  }
  if (!active) return;
  out.push_back({Severity::kWarning, "net.ib-disabled",
                 "NCCL_IB_DISABLE=1 keeps NCCL off the active RDMA ports: it uses TCP sockets",
                 fmt::format("NCCL_IB_DISABLE=1 ({}) with active RDMA ports", s.env_source),
                 "unset NCCL_IB_DISABLE"});
}

}  // namespace

std::vector<Finding> check_network(const NetworkState& s) {
  std::vector<Finding> out;
  ports(s, out);
  gpudirect(s, out);
  memlock(s, out);
  if (!s.env.empty()) {
    std::vector<std::string> kv;
    for (const auto& [k, v] : s.env) kv.push_back(k + "=" + v);
    out.push_back({Severity::kInfo, "net.nccl-env", fmt::format("NCCL environment ({})", s.env_source),
                   fmt::format("{}", fmt::join(kv, " ")), ""});
  }
  socket_ifname(s, out);
  ib_hca(s, out);
  ib_disabled(s, out);
  return out;
}

}  // namespace gpuorch::doctor

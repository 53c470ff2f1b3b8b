// Diagnoses no single line makes: the transport between hosts and what chose it. A log where
// NCCL_IB_DISABLE=1 is set and NET/Socket carries the traffic is the environment's doing, not a
// missing device; one where an RDMA plugin is installed and "NET/IB : No device found" follows is a
// device the job cannot see. Each names its cause so the advice fits it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "gpuorch/doctor/nccl_log_findings.hpp"

namespace gpuorch::doctor {
namespace {

Finding* find(std::vector<Finding>& out, const std::string& id) {
  for (auto& f : out) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

std::string hosts_of(const NcclLog& log, const std::string& fact) {
  const auto it = log.facts.find(fact);
  if (it == log.facts.end() || it->second.empty()) return "the host(s) of this log";
  return fmt::format("{}", fmt::join(it->second, ", "));
}

// The first line that established `fact`, quoted for the evidence.
std::string first_line_of(const NcclLog& log, const std::string& fact) {
  for (const auto& h : log.hits) {
    const auto& facts = h.entry->facts;
    if (std::find(facts.begin(), facts.end(), fact) != facts.end()) {
      return fmt::format("line {}: \"{}\"", h.first_line, h.text);
    }
  }
  return {};
}

// Why the log says RDMA should be there: a plugin for it, or settings that ask for it.
std::string expectation(const NcclLog& log) {
  std::vector<std::string> why;
  if (has_fact(log, "ib_plugin")) why.emplace_back("an RDMA network plugin is installed");
  if (has_fact(log, "ib_wanted")) why.emplace_back("NCCL_IB_DISABLE=0 or NCCL_IB_HCA is set");
  return fmt::format("{}", fmt::join(why, ", "));
}

struct SocketTraffic {
  std::size_t socket = 0, net = 0;
  const NcclConnection* example = nullptr;
};

// Each side of a network connection logs it; count a connection once.
SocketTraffic socket_traffic(const NcclLog& log) {
  std::set<std::tuple<int, int, int, std::string>> seen;
  SocketTraffic t;
  for (const auto& c : log.connections) {
    if (!seen.insert({c.channel, c.from_rank, c.to_rank, c.via}).second) continue;
    const bool net = c.transport == Transport::kNetIb || c.transport == Transport::kNetSocket ||
                     c.transport == Transport::kNetOther;
    if (net) ++t.net;
    if (c.transport == Transport::kNetSocket) {
      ++t.socket;
      if (!t.example) t.example = &c;
    }
  }
  return t;
}

void socket_fallback(const NcclLog& log, const SocketTraffic& t, std::vector<Finding>& out) {
  const bool no_device = has_fact(log, "no_ib_device");
  const bool plugin = has_fact(log, "ib_plugin");
  Finding f;
  f.severity = Severity::kWarning;
  f.id = "nccl.socket-fallback";
  f.what = "traffic between hosts goes over TCP sockets (NET/Socket), not RDMA";
  if (t.socket > 0) {
    f.evidence = fmt::format(
        "{} of {} network connections via NET/Socket, line {}: {} -> {} via {}", t.socket, t.net,
        t.example->line, t.example->from_rank, t.example->to_rank, t.example->via);
  } else {
    f.evidence = "the communicator's network is Socket (" + first_line_of(log, "socket_chosen") +
                 ") and the job spans more than this host";
  }
  if (no_device) {
    f.evidence += fmt::format("; 'NET/IB : No device found' on {}", hosts_of(log, "no_ib_device"));
  }
  if (plugin) f.evidence += "; RDMA plugin: " + first_line_of(log, "ib_plugin");
  if (has_fact(log, "ibverbs_missing")) {
    f.what += "; likely cause: NCCL cannot load libibverbs on " + hosts_of(log, "ibverbs_missing") +
              " (rdma-core is not installed in the image), so RDMA cannot be used at all";
  } else if (no_device && (plugin || has_fact(log, "ib_wanted"))) {
    f.what += "; likely cause: RDMA is expected (" + expectation(log) +
              "), but NCCL sees no RDMA device on " + hosts_of(log, "no_ib_device") +
              " (the container lacks /dev/infiniband, the HCA driver is not loaded, or NCCL_IB_HCA "
              "excludes every device)";
  } else if (no_device) {
    f.what += "; likely cause: NCCL found no RDMA device on " + hosts_of(log, "no_ib_device") +
              " (none installed, none visible in the container, or the driver is not loaded)";
  }
  f.fix = fmt::format(
      "on {}: {}`ibv_devinfo` inside the job's container (a device must show PORT_ACTIVE), mount "
      "/dev/infiniband or request the RDMA device resource (Kubernetes), `gpuorch doctor network` "
      "for the ports, peermem and NCCL_IB_HCA; `gpuorch topo` shows which NIC is near each GPU",
      no_device ? hosts_of(log, "no_ib_device") : std::string("each host"),
      has_fact(log, "ibverbs_missing")
          ? "install rdma-core (libibverbs1, ibverbs-providers) in the image, then "
          : "");
  out.push_back(std::move(f));
}

void rdma_without_device(const NcclLog& log, std::vector<Finding>& out) {
  Finding f;
  f.severity = one_host(log) ? Severity::kInfo : Severity::kWarning;
  f.id = "nccl.rdma-no-device";
  f.what = fmt::format(
      "RDMA is expected ({}) but NCCL found no RDMA device on {}: traffic between "
      "hosts will fall back to TCP sockets; likely cause: the RDMA devices are not visible to the "
      "job (no /dev/infiniband in the container, the RDMA device resource not requested, the HCA "
      "driver not loaded) or NCCL_IB_HCA names none of them",
      expectation(log), hosts_of(log, "no_ib_device"));
  f.evidence = first_line_of(log, "no_ib_device") + "; no 'NET/IB : Using' line";
  if (has_fact(log, "ib_plugin")) f.evidence += "; RDMA plugin: " + first_line_of(log, "ib_plugin");
  if (has_fact(log, "ib_wanted")) f.evidence += "; " + first_line_of(log, "ib_wanted");
  if (one_host(log)) {
    f.what += " (this job ran on one host, where it costs nothing)";
  } else {
    f.fix = fmt::format(
        "on {}: `ibv_devinfo` inside the job's container (a device must show PORT_ACTIVE), mount "
        "/dev/infiniband or request the RDMA device resource (Kubernetes: e.g. rdma/ib in the "
        "pod's "
        "limits), `lsmod | grep mlx5_ib`, `gpuorch doctor network`; NCCL_IB_HCA must name devices "
        "`ibv_devices` lists",
        hosts_of(log, "no_ib_device"));
  }
  out.push_back(std::move(f));
}

}  // namespace

void diagnose_network(const NcclLog& log, std::vector<Finding>& out) {
  const SocketTraffic t = socket_traffic(log);
  const bool ib_used = has_fact(log, "ib_used") || has_fact(log, "ib_chosen");
  const bool rdma_expected = has_fact(log, "ib_plugin") || has_fact(log, "ib_wanted");
  // The environment's choice is reported by its own finding (its cost included); the socket
  // traffic is added to it as evidence rather than raised again as a fallback.
  Finding* env = find(out, "nccl.env-ib-disabled");
  if (!env) env = find(out, "nccl.env-net-socket");
  if (env) {
    if (t.socket > 0) {
      env->evidence +=
          fmt::format("; {} of {} network connections via NET/Socket", t.socket, t.net);
    }
    if (has_fact(log, "socket_net_up")) {
      env->evidence += "; sockets in use: " + first_line_of(log, "socket_net_up");
    }
  } else if (t.socket > 0 || (!ib_used && has_fact(log, "socket_chosen") &&
                              has_fact(log, "no_ib_device") && !one_host(log) &&
                              (rdma_expected || has_fact(log, "ibverbs_missing") ||
                               log.hosts.size() > 1 || log.nnodes.value_or(1) > 1))) {
    // Sockets carry (or will carry) the traffic between hosts: a job on one host has none.
    socket_fallback(log, t, out);
  } else if (!ib_used && has_fact(log, "no_ib_device") && rdma_expected) {
    rdma_without_device(log, out);
  }
  // NCCL found no interface for its sockets: say which setting chose none.
  if (Finding* f = find(out, "nccl.no-socket-interface")) {
    const auto it = log.env.find("NCCL_SOCKET_IFNAME");
    if (it != log.env.end()) {
      f->what += fmt::format(" (here NCCL_SOCKET_IFNAME={} is set by the environment)", it->second);
    }
  }
}

}  // namespace gpuorch::doctor

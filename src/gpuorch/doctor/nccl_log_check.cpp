// Each finding names the lines it stands on, so a person can go from the verdict to the log.
#include "gpuorch/doctor/nccl_log_check.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>

#include "gpuorch/doctor/nccl_log_findings.hpp"

namespace gpuorch::doctor {
namespace {

// Each side of a network connection logs it ([send] and [receive]); count a connection once.
using ConnKey = std::tuple<int, int, int, std::string>;

std::vector<const NcclConnection*> distinct(const NcclLog& log) {
  std::set<ConnKey> seen;
  std::vector<const NcclConnection*> out;
  for (const auto& c : log.connections) {
    if (seen.insert({c.channel, c.from_rank, c.to_rank, c.via}).second) out.push_back(&c);
  }
  return out;
}

std::string example(const NcclConnection& c) {
  return fmt::format("line {}: {} -> {} via {}", c.line, c.from_rank, c.to_rank, c.via);
}

std::string rank_name(const NcclLog& log, int rank) {
  const auto it = log.init_complete.find(rank);
  if (it == log.init_complete.end() || it->second.host.empty()) return fmt::format("{}", rank);
  return fmt::format("{} ({} pid {})", rank, it->second.host, it->second.pid);
}

std::string env_evidence(const NcclLog& log, std::initializer_list<const char*> names) {
  std::vector<std::string> set;
  for (const char* n : names) {
    const auto it = log.env.find(n);
    if (it != log.env.end()) set.push_back(fmt::format("{}={}", n, it->second));
  }
  return set.empty() ? std::string()
                     : fmt::format("; set by environment: {}", fmt::join(set, ", "));
}

Finding summary(const NcclLog& log, const std::vector<const NcclConnection*>& conns) {
  std::map<std::string, int> by_transport;
  int gdr = 0;
  for (const auto* c : conns) {
    ++by_transport[to_string(c->transport)];
    if (c->gdr) ++gdr;
  }
  std::vector<std::string> parts;
  for (const auto& [t, n] : by_transport) parts.push_back(fmt::format("{} {}", t, n));
  if (gdr > 0) parts.push_back(fmt::format("of which GPUDirect RDMA {}", gdr));
  Finding f;
  f.id = "nccl.summary";
  f.what = fmt::format(
      "NCCL {}: {} ranks on {} host(s), {} ring channel(s), {} tree channel(s), network {}",
      log.version.empty() ? "(version not logged)" : log.version,
      log.nranks ? fmt::format("{}", *log.nranks) : std::string("?"), log.hosts.size(),
      log.rings.size(), log.tree_channels.size(),
      log.networks.empty() ? std::string("not logged")
                           : fmt::format("{}", fmt::join(log.networks, ", ")));
  f.evidence = fmt::format(
      "{} NCCL lines of {} ({} recognised by the catalogue); connections {}{}", log.nccl_lines,
      log.lines, log.recognised,
      parts.empty() ? std::string("none logged (NCCL_DEBUG_SUBSYS without INIT?)")
                    : fmt::format("{}", fmt::join(parts, ", ")),
      log.graph_types.empty()
          ? std::string()
          : fmt::format("; graph path types (intra/inter) {}", fmt::join(log.graph_types, ", ")));
  return f;
}

void transports(const NcclLog& log, const std::vector<const NcclConnection*>& conns,
                std::vector<Finding>& out) {
  // NET/Socket traffic is diagnosed with its cause in nccl_log_diagnose.cpp.
  std::vector<const NcclConnection*> ib_no_gdr, shm;
  for (const auto* c : conns) {
    if (c->transport == Transport::kNetIb && !c->gdr) ib_no_gdr.push_back(c);
    if (c->transport == Transport::kShm) shm.push_back(c);
  }
  if (!ib_no_gdr.empty()) {
    Finding f;
    f.severity = Severity::kWarning;
    f.id = "nccl.ib-without-gdr";
    f.what = "RDMA without GPUDirect: network data is staged through host memory";
    f.evidence = fmt::format("{} NET/IB connections without GDRDMA, {}", ib_no_gdr.size(),
                             example(*ib_no_gdr.front())) +
                 env_evidence(log, {"NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ"});
    f.fix =
        "load nvidia-peermem (`modprobe nvidia-peermem`; `gpuorch doctor network` checks it) and "
        "keep each GPU's NIC under the same PCIe switch (`gpuorch topo`), or raise "
        "NCCL_NET_GDR_LEVEL";
    out.push_back(std::move(f));
  }
  if (!shm.empty()) {
    Finding f;
    f.severity = Severity::kWarning;
    f.id = "nccl.shm-not-p2p";
    f.what =
        "GPUs of one host exchange data through host shared memory (SHM), not P2P over "
        "NVLink/PCIe";
    f.evidence = fmt::format("{} connections via SHM, {}", shm.size(), example(*shm.front())) +
                 env_evidence(log, {"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"});
    f.fix =
        "unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL, run the ranks of a host in one container (shared "
        "IPC namespace), and check that ACS/IOMMU does not block P2P (`nvidia-smi topo -p2p r`)";
    out.push_back(std::move(f));
  }
}

void loopback(const NcclLog& log, std::vector<Finding>& out) {
  if (log.hosts.size() < 2) return;
  std::vector<std::string> local;  // "gpu01 uses lo"
  for (const auto& [host, ifname] : log.socket_ifs) {
    if (ifname == "lo" || ifname.rfind("docker", 0) == 0) {
      local.push_back(fmt::format("{} uses {}", host, ifname));
    }
  }
  if (local.empty()) return;
  Finding f;
  f.severity = Severity::kWarning;
  f.id = "nccl.socket-interface";
  f.what = "NCCL's sockets use an interface other hosts cannot reach (loopback or docker bridge)";
  f.evidence = fmt::format("{} hosts in the log; {}", log.hosts.size(), fmt::join(local, ", ")) +
               env_evidence(log, {"NCCL_SOCKET_IFNAME"});
  f.fix = "set NCCL_SOCKET_IFNAME to the interface of the cluster network (e.g. =eth0 or ib0)";
  out.push_back(std::move(f));
}

// WARN lines the catalogue does not know (a newer NCCL, a plugin's own): grouped by message.
void unknown_warnings(const NcclLog& log, std::vector<Finding>& out) {
  struct Seen {
    std::size_t first_line = 0, count = 0;
    std::string source;
    std::set<std::string> hosts;
  };
  std::map<std::string, Seen> by_message;
  std::vector<std::string> order;
  for (const auto& w : log.warnings) {
    auto [it, fresh] = by_message.try_emplace(w.message);
    if (fresh) {
      it->second.first_line = w.line;
      it->second.source = w.source;
      order.push_back(w.message);
    }
    ++it->second.count;
    if (!w.host.empty()) it->second.hosts.insert(w.host);
  }
  constexpr std::size_t kShown =
      10;  // a failing job repeats its WARN per rank; the first few say it
  for (std::size_t i = 0; i < order.size() && i < kShown; ++i) {
    const Seen& s = by_message[order[i]];
    Finding f;
    f.severity = Severity::kError;
    f.id = "nccl.warn";
    f.what = fmt::format("NCCL WARN {} (a message not in doctor's catalogue)", order[i]);
    f.evidence = fmt::format(
        "{} time(s){}, first at line {}{}", s.count,
        s.hosts.empty() ? std::string() : fmt::format(" on {}", fmt::join(s.hosts, ", ")),
        s.first_line, s.source.empty() ? "" : " (" + s.source + ")");
    f.fix =
        "the first WARN is usually the cause: rerun with NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH for "
        "detail";
    out.push_back(std::move(f));
  }
  if (order.size() > kShown) {
    out.push_back({Severity::kError, "nccl.warn",
                   fmt::format("{} more distinct NCCL WARN messages", order.size() - kShown),
                   fmt::format("{} WARN lines in all", log.warnings.size()),
                   "read the first WARN lines of the log"});
  }
}

// At most this many ranks are named in a finding; the rest are counted.
constexpr std::size_t kListedRanks = 32;

void timeouts(const NcclLog& log, std::vector<Finding>& out) {
  // One finding per collective that timed out (PyTorch's sequence number).
  std::map<long long, std::vector<const CollectiveTimeout*>> by_seq;
  for (const auto& t : log.timeouts) by_seq[t.seq].push_back(&t);
  for (const auto& [seq, reports] : by_seq) {
    std::set<int> reported;
    for (const auto* t : reports) reported.insert(t->rank);
    // The rank that stopped is the one not waiting in this collective: it never reported the
    // timeout, or its watchdog says it never enqueued it.
    std::set<int> stopped;
    std::vector<std::string> why;
    // The silent ranks are counted, and the first kListedRanks named: the log's nranks can be
    // anything up to INT_MAX, and a loop over all of them hung `doctor nccl-log` (fuzz_nccl_log).
    const int world = log.nranks.value_or(0);
    const auto in_world =
        std::count_if(reported.begin(), reported.end(), [&](int r) { return r >= 0 && r < world; });
    const long long silent = static_cast<long long>(world) - in_world;
    for (int r = 0; r < world && why.size() < kListedRanks; ++r) {
      if (!reported.count(r)) {
        stopped.insert(r);
        why.push_back(fmt::format("rank {} reported no timeout", r));
      }
    }
    const long long unnamed = silent - static_cast<long long>(why.size());
    if (unnamed > 0) why.push_back(fmt::format("{} more ranks reported no timeout", unnamed));
    for (const auto& [r, p] : log.progress) {
      if (p.last_enqueued >= 0 && p.last_enqueued < seq) {
        stopped.insert(r);
        why.push_back(fmt::format("rank {} last enqueued work {} < {}", r, p.last_enqueued, seq));
      }
    }
    const CollectiveTimeout& first = *reports.front();
    Finding f;
    f.severity = Severity::kError;
    f.id = "nccl.timeout";
    std::vector<std::string> names;
    for (const int r : stopped) names.push_back(rank_name(log, r));
    if (unnamed > 0) names.push_back(fmt::format("and {} more", unnamed));
    f.what = fmt::format("collective {} #{} timed out after {} ms on {} rank(s){}", first.op, seq,
                         first.timeout_ms, reported.size(),
                         stopped.empty()
                             ? std::string("; every rank was waiting in it")
                             : fmt::format("; rank(s) that stopped: {}", fmt::join(names, ", ")));
    f.evidence = fmt::format("watchdog at line {}: rank {} ran {} ms; timed-out ranks {}",
                             first.line, first.rank, first.ran_ms, fmt::join(reported, ","));
    if (!why.empty()) f.evidence += fmt::format("; {}", fmt::join(why, "; "));
    f.fix =
        stopped.empty()
            ? "all ranks wait on the network: see the WARN lines and `gpuorch doctor network`; "
              "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 dumps what each rank was doing"
            : "look at the stopped rank's own output and host first (crash, OOM kill, a hang in "
              "data loading, or code that issues a different number of collectives)";
    out.push_back(std::move(f));
  }
}

void init(const NcclLog& log, std::vector<Finding>& out) {
  if (!log.nranks || log.init_complete.empty()) return;
  if (log.init_complete.size() >= static_cast<std::size_t>(*log.nranks)) return;
  // Counted, and the first kListedRanks named (nranks can be anything up to INT_MAX).
  const int world = *log.nranks;
  const auto completed =
      std::count_if(log.init_complete.begin(), log.init_complete.end(),
                    [&](const auto& e) { return e.first >= 0 && e.first < world; });
  const long long missing_count = static_cast<long long>(world) - completed;
  std::vector<int> missing;
  for (int r = 0; r < world && missing.size() < kListedRanks; ++r) {
    if (!log.init_complete.count(r)) missing.push_back(r);
  }
  const long long unnamed = missing_count - static_cast<long long>(missing.size());
  const std::string more = unnamed > 0 ? fmt::format(" and {} more", unnamed) : std::string();
  Finding f;
  f.severity = Severity::kWarning;
  f.id = "nccl.init-incomplete";
  f.what = fmt::format(
      "{} of {} ranks never logged Init COMPLETE: they hung or died in init, or "
      "their output is not in this log",
      missing_count, *log.nranks);
  f.evidence = fmt::format("missing ranks {}{}; ranks {} completed", fmt::join(missing, ","), more,
                           log.init_complete.size());
  f.fix =
      "collect every rank's output (torchrun --tee 3, or one log per host) and look for the "
      "missing ranks' first error";
  out.push_back(std::move(f));
}

}  // namespace

std::vector<Finding> check_nccl_log(const NcclLog& log, const NcclCheckOptions& options) {
  const auto conns = distinct(log);
  std::vector<Finding> out{summary(log, conns)};
  auto known = catalogue_findings(log, options);
  transports(log, conns, out);
  // A structural finding and a catalogue line of the same id are one problem: the line becomes
  // evidence of the finding (e.g. NET/IB without GDRDMA and "GPU Direct RDMA Disabled ... (no
  // module)").
  for (auto& k : known) {
    const auto same =
        std::find_if(out.begin(), out.end(), [&](const Finding& f) { return f.id == k.id; });
    if (same != out.end() && k.id != "nccl.warn") {
      same->evidence += "; " + k.evidence;
      same->what += " (" + k.what + ")";
      continue;
    }
    out.push_back(std::move(k));
  }
  diagnose_network(log, out);
  // SHM between a host's GPUs because NCCL_P2P_DISABLE (or NCCL_P2P_LEVEL=LOC) said so: one
  // problem, reported by the setting's finding with its cost; the connections become its evidence.
  const auto env_p2p = std::find_if(
      out.begin(), out.end(), [](const Finding& f) { return f.id == "nccl.env-p2p-disabled"; });
  const auto shm = std::find_if(out.begin(), out.end(),
                                [](const Finding& f) { return f.id == "nccl.shm-not-p2p"; });
  if (env_p2p != out.end() && shm != out.end()) {
    env_p2p->evidence += "; " + shm->evidence;
    out.erase(shm);
  }
  loopback(log, out);
  unknown_warnings(log, out);
  timeouts(log, out);
  init(log, out);
  return out;
}

}  // namespace gpuorch::doctor

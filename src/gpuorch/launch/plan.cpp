#include "gpuorch/launch/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/units.hpp"
#include "gpuorch/sched/gpu_picker.hpp"
#include "gpuorch/topology/link_scores.hpp"

namespace gpuorch::launch {
namespace {

using topology::IdSet;

// The GPU's NUMA node; a VM often reports -1, then the node holding most of its local CPUs.
int numa_of(const topology::Host& host, const topology::Gpu& gpu) {
  if (gpu.numa_node >= 0) return gpu.numa_node;
  int best = -1;
  std::size_t best_overlap = 0;
  for (const auto& n : host.numa_nodes) {
    const std::size_t overlap = topology::intersect(n.cpus, gpu.local_cpus).size();
    if (overlap > best_overlap) {
      best = n.id;
      best_overlap = overlap;
    }
  }
  if (best < 0 && host.numa_nodes.size() == 1) best = host.numa_nodes.front().id;
  return best;
}

const topology::NumaNode* node_by_id(const topology::Host& host, int id) {
  for (const auto& n : host.numa_nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;
}

// The node's online CPUs: empty for a memory-only node (GPU memory on GH200, CXL memory).
IdSet own_cpus(const topology::Host& host, const topology::NumaNode& n) {
  return host.online_cpus.empty() ? n.cpus : topology::intersect(n.cpus, host.online_cpus);
}

// CPUs a rank on `node` may use: the node's online CPUs, or (node unknown, or no node has
// CPUs) the GPU's local CPUs, or every online CPU.
IdSet node_cpus(const topology::Host& host, int node, const IdSet& fallback) {
  IdSet cpus;
  if (const auto* n = node_by_id(host, node)) cpus = own_cpus(host, *n);
  if (cpus.empty()) cpus = fallback;
  if (cpus.empty()) cpus = host.online_cpus;
  return cpus;
}

// The node whose cores (and memory) serve a GPU whose own node is `own`. A node without CPUs
// holds memory only (the GPU's own HBM on GH200, a CXL expander): the rank runs on the nearest
// node with CPUs, by the NUMA distance matrix, else the one holding most of the GPU's local
// CPUs, else the first; and binds its memory there too, since MPOL_BIND to the memory-only node
// would put all of the process's host memory in it. `why` says what was chosen, when anything was.
int cpu_node_for(const topology::Host& host, int own, const std::vector<int>& cpu_nodes,
                 const IdSet& gpu_local_cpus, std::string& why) {
  const auto* node = node_by_id(host, own);
  if (!node || cpu_nodes.empty() ||
      std::find(cpu_nodes.begin(), cpu_nodes.end(), own) != cpu_nodes.end()) {
    return own;
  }
  int best = -1;
  int best_distance = 0;
  if (node->distances.size() == host.numa_nodes.size()) {
    for (std::size_t i = 0; i < host.numa_nodes.size(); ++i) {
      const int id = host.numa_nodes[i].id;
      if (std::find(cpu_nodes.begin(), cpu_nodes.end(), id) == cpu_nodes.end()) continue;
      if (best < 0 || node->distances[i] < best_distance) {
        best = id;
        best_distance = node->distances[i];
      }
    }
    why = fmt::format("node {}, the nearest with CPUs (distance {})", best, best_distance);
    return best;
  }
  std::size_t best_overlap = 0;
  for (const int id : cpu_nodes) {
    const std::size_t overlap =
        topology::intersect(own_cpus(host, *node_by_id(host, id)), gpu_local_cpus).size();
    if (overlap > best_overlap) {
      best = id;
      best_overlap = overlap;
    }
  }
  if (best >= 0) {
    why = fmt::format("node {}, which holds its local CPUs (no NUMA distances)", best);
    return best;
  }
  why = fmt::format("node {}, the first with CPUs (no NUMA distances, no local CPUs)",
                    cpu_nodes.front());
  return cpu_nodes.front();
}

bool port_active(const topology::Nic& nic) {
  return std::any_of(nic.ports.begin(), nic.ports.end(),
                     [](const topology::NicPort& p) { return p.state == "ACTIVE"; });
}

// Nearest NIC of a GPU: the closest PCIe path, an active port before a down one, then the lower
// index (NCCL's own ordering when it ranks NICs by distance).
void nearest_nic_of_gpu(const topology::Host& host, int gpu, RankBinding& r) {
  int best = -1;
  std::tuple<int, int, int> best_key{};
  for (std::size_t i = 0; i < host.nics.size(); ++i) {
    const std::size_t dev = host.gpus.size() + i;
    const auto* link = host.link(static_cast<std::size_t>(gpu), dev);
    const auto path = link ? link->pcie : topology::Path::kSys;
    const std::tuple<int, int, int> key{static_cast<int>(path), port_active(host.nics[i]) ? 0 : 1,
                                        static_cast<int>(i)};
    if (best < 0 || key < best_key) {
      best = static_cast<int>(i);
      best_key = key;
    }
  }
  if (best < 0) return;
  r.nic = host.nics[static_cast<std::size_t>(best)].name;
  r.nic_path = topology::to_string(static_cast<topology::Path>(std::get<0>(best_key)));
}

// A CPU rank's NIC: one on its NUMA node, else the first.
void nearest_nic_of_node(const topology::Host& host, int node, RankBinding& r) {
  if (host.nics.empty()) return;
  const topology::Nic* pick = &host.nics.front();
  for (const auto& n : host.nics) {
    if (n.numa_node == node && node >= 0) {
      pick = &n;
      break;
    }
  }
  r.nic = pick->name;
  r.nic_path = pick->numa_node == node && node >= 0 ? "NODE" : "SYS";
}

}  // namespace

const char* to_string(BindMode m) {
  switch (m) {
    case BindMode::kNone:
      return "none";
    case BindMode::kNuma:
      return "numa";
    case BindMode::kCores:
      return "cores";
  }
  return "none";
}

const char* to_string(Backend b) {
  switch (b) {
    case Backend::kNccl:
      return "nccl";
    case Backend::kRccl:
      return "rccl";
    case Backend::kGloo:
      return "gloo";
  }
  return "gloo";
}

const char* torch_backend(Backend b) { return b == Backend::kGloo ? "gloo" : "nccl"; }

std::optional<BindMode> parse_bind_mode(const std::string& s) {
  if (s == "none") return BindMode::kNone;
  if (s == "numa") return BindMode::kNuma;
  if (s == "cores") return BindMode::kCores;
  return std::nullopt;
}

std::optional<Backend> parse_backend(const std::string& s) {
  if (s == "nccl") return Backend::kNccl;
  if (s == "rccl") return Backend::kRccl;
  if (s == "gloo") return Backend::kGloo;
  return std::nullopt;
}

std::vector<IdSet> physical_cores(const topology::Host& host, const IdSet& cpus) {
  std::vector<IdSet> cores;
  const int n = host.cores;
  if (n > 0 && host.logical_cpus > n && host.logical_cpus % n == 0) {
    for (const int c : cpus) {
      if (c >= n) continue;
      IdSet threads;
      for (int t = c; t < host.logical_cpus; t += n) {
        if (std::binary_search(cpus.begin(), cpus.end(), t)) threads.push_back(t);
      }
      cores.push_back(std::move(threads));
    }
    if (!cores.empty()) return cores;
  }
  for (const int c : cpus) cores.push_back({c});
  return cores;
}

Plan make_plan(const topology::Host& host, const PlanRequest& request) {
  Plan plan;
  plan.hostname = host.hostname;
  plan.bind = request.bind;
  plan.own_gpu_only = request.own_gpu_only;
  const int nproc = request.nproc;
  if (nproc < 1) base::fail_input("--nproc-per-node: must be at least 1");
  const int gpus = static_cast<int>(host.gpus.size());
  plan.amd = gpus > 0 && host.gpus.front().vendor == topology::Vendor::kAmd;
  plan.backend = gpus == 0 ? Backend::kGloo : plan.amd ? Backend::kRccl : Backend::kNccl;
  if (request.backend) plan.backend = *request.backend;
  const bool use_gpus = gpus > 0 && nproc <= gpus;
  if (gpus > 0 && nproc > gpus) {
    if (request.bind != BindMode::kNone) {
      base::fail_input(fmt::format(
          "--nproc-per-node {}: more ranks than GPUs ({}) with --bind {}; use --bind none to "
          "share GPUs",
          nproc, gpus, to_string(request.bind)));
    }
    plan.notes.push_back(
        fmt::format("{} ranks on {} GPUs: device visibility left to the script", nproc, gpus));
  }

  // Each rank's NUMA node: its GPU's, or for CPU ranks a block split over the nodes with CPUs.
  std::vector<int> cpu_nodes;
  for (const auto& n : host.numa_nodes) {
    if (!own_cpus(host, n).empty()) cpu_nodes.push_back(n.id);
  }
  // Fewer ranks than GPUs: the best-connected GPUs, by the scheduler core's one picker (the
  // same choice a pod gets from the scheduler and the device plugin); all of them otherwise.
  std::vector<int> gpu_of_rank;
  if (use_gpus) {
    const auto n = static_cast<std::size_t>(gpus);
    const std::vector<std::int32_t> all_free(n, static_cast<std::int32_t>(base::kMilliPerGpu));
    gpu_of_rank = sched::pick_gpus(all_free, nproc, topology::gpu_link_scores(host));
  }
  for (int r = 0; r < nproc; ++r) {
    RankBinding b;
    b.local_rank = r;
    if (use_gpus) {
      const int g = gpu_of_rank[static_cast<std::size_t>(r)];
      b.gpu = host.gpus[static_cast<std::size_t>(g)].index;
      b.device_index = request.own_gpu_only ? 0 : r;
      const auto& gpu = host.gpus[static_cast<std::size_t>(g)];
      const int own = numa_of(host, gpu);
      std::string why;
      b.numa_node = cpu_node_for(host, own, cpu_nodes, gpu.local_cpus, why);
      if (!why.empty()) {
        plan.notes.push_back(fmt::format(
            "GPU {}: NUMA node {} has no CPUs (memory only); its rank runs on, and binds memory "
            "to, {}",
            gpu.index, own, why));
      }
      nearest_nic_of_gpu(host, g, b);
    } else {
      b.gpu = -1;
      b.numa_node = cpu_nodes.empty() ? -1
                                      : cpu_nodes[static_cast<std::size_t>(r) * cpu_nodes.size() /
                                                  static_cast<std::size_t>(nproc)];
      nearest_nic_of_node(host, b.numa_node, b);
    }
    plan.ranks.push_back(std::move(b));
  }

  // Split each node's physical cores evenly among the ranks on it, in local-rank order; with more
  // ranks than cores, ranks share cores round-robin.
  std::map<int, std::vector<int>> ranks_on_node;
  for (const auto& b : plan.ranks) ranks_on_node[b.numa_node].push_back(b.local_rank);
  for (const auto& [node, members] : ranks_on_node) {
    const IdSet fallback =
        use_gpus ? host.gpus[static_cast<std::size_t>(
                                 gpu_of_rank[static_cast<std::size_t>(members.front())])]
                       .local_cpus
                 : IdSet{};
    const IdSet cpus = node_cpus(host, node, fallback);
    const auto cores = physical_cores(host, cpus);
    const std::size_t k = members.size();
    const std::size_t m = cores.size();
    for (std::size_t i = 0; i < k; ++i) {
      auto& b = plan.ranks[static_cast<std::size_t>(members[i])];
      IdSet share;
      int share_cores = 0;
      if (m >= k) {
        for (std::size_t c = i * m / k; c < (i + 1) * m / k; ++c) {
          share.insert(share.end(), cores[c].begin(), cores[c].end());
          ++share_cores;
        }
      } else if (m > 0) {
        share = cores[i % m];
        share_cores = 1;
      }
      std::sort(share.begin(), share.end());
      b.cores = share_cores;
      switch (request.bind) {
        case BindMode::kCores:
          b.cpus = share;
          b.omp_threads = std::max(1, share_cores);
          b.bind_memory = node >= 0;
          break;
        case BindMode::kNuma:
          b.cpus = cpus;
          b.omp_threads = std::max(1, share_cores);
          b.bind_memory = node >= 0;
          break;
        case BindMode::kNone:
          // torchrun's rule: one thread per worker when several share the host.
          b.omp_threads = nproc > 1 ? 1 : std::max(1, static_cast<int>(m));
          break;
      }
    }
    if (m < k && request.bind != BindMode::kNone) {
      plan.notes.push_back(fmt::format("NUMA node {}: {} ranks share {} cores", node, k, m));
    }
  }
  return plan;
}

std::vector<std::pair<std::string, std::string>> Plan::rank_env(int local_rank) const {
  std::vector<std::pair<std::string, std::string>> env;
  const auto& b = ranks.at(static_cast<std::size_t>(local_rank));
  const bool any_gpu =
      std::any_of(ranks.begin(), ranks.end(), [](const RankBinding& r) { return r.gpu >= 0; });
  if (any_gpu) {
    std::string visible;
    if (own_gpu_only) {
      visible = std::to_string(b.gpu);
    } else {
      for (const auto& r : ranks) {
        if (!visible.empty()) visible += ',';
        visible += std::to_string(r.gpu);
      }
    }
    if (amd) {
      // ROCR filters first and HIP indexes into what ROCR left: physical ids go to ROCR only.
      std::string hip;
      const int count = own_gpu_only ? 1 : static_cast<int>(ranks.size());
      for (int i = 0; i < count; ++i) {
        if (i > 0) hip += ',';
        hip += std::to_string(i);
      }
      env.emplace_back("ROCR_VISIBLE_DEVICES", visible);
      env.emplace_back("HIP_VISIBLE_DEVICES", hip);
    } else {
      // CUDA's default order is fastest-first; the plan's indices are PCI (NVML) order.
      env.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
      env.emplace_back("CUDA_VISIBLE_DEVICES", visible);
    }
    env.emplace_back("GPUORCH_GPU", std::to_string(b.gpu));
  }
  // "=name" is NCCL's exact match: a bare "mlx5_1" would also select mlx5_10..mlx5_17.
  if (!b.nic.empty()) env.emplace_back("NCCL_IB_HCA", fmt::format("={}", b.nic));
  if (b.numa_node >= 0) env.emplace_back("GPUORCH_NUMA_NODE", std::to_string(b.numa_node));
  env.emplace_back("GPUORCH_BACKEND", to_string(backend));
  env.emplace_back("GPUORCH_TORCH_BACKEND", torch_backend(backend));
  env.emplace_back("GPUORCH_BIND", to_string(bind));
  return env;
}

}  // namespace gpuorch::launch

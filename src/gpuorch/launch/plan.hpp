#pragma once
// The binding plan of one node: for each local rank its GPU, the share of CPU cores of that GPU's
// NUMA node, the memory node and the nearest RDMA NIC (docs/launch.md, "Binding rule"). Pure: a
// Host in, a Plan out, so recorded hosts (tests/fixtures/topo) are planned exactly like live ones.
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/topology/host.hpp"

namespace gpuorch::launch {

enum class BindMode { kNone, kNuma, kCores };
enum class Backend { kNccl, kRccl, kGloo };

const char* to_string(BindMode m);
const char* to_string(Backend b);
// The name torch.distributed.init_process_group takes (RCCL is "nccl" in ROCm builds).
const char* torch_backend(Backend b);
// nullopt for an unknown name.
std::optional<BindMode> parse_bind_mode(const std::string& s);
std::optional<Backend> parse_backend(const std::string& s);

struct RankBinding {
  int local_rank = 0;
  int gpu = -1;          // Host GPU index; -1 for a CPU rank
  int device_index = 0;  // index of that GPU among the visible devices the rank sees
  int numa_node = -1;    // the GPU's (or the CPU rank's) NUMA node; -1 unknown
  topology::IdSet cpus;  // affinity; empty = not bound (inherit)
  int cores = 0;         // physical cores in the rank's share
  int omp_threads = 1;   // OMP_NUM_THREADS unless the user set it
  bool bind_memory = false;
  std::string nic;       // nearest RDMA NIC ("mlx5_0"); empty when the host has none
  std::string nic_path;  // "PIX", "NODE", ...
};

struct PlanRequest {
  int nproc = 1;
  BindMode bind = BindMode::kCores;
  std::optional<Backend> backend;  // default: from the GPUs' vendor
  bool own_gpu_only = false;       // each rank sees only its GPU, as device 0, and LOCAL_RANK 0
};

struct Plan {
  std::string hostname;
  BindMode bind = BindMode::kCores;
  Backend backend = Backend::kGloo;
  bool amd = false;
  bool own_gpu_only = false;
  std::vector<RankBinding> ranks;
  std::vector<std::string> notes;  // how the rule was applied where the host left a choice

  // The environment each rank gets from the plan alone (device visibility, NIC, backend);
  // OMP_NUM_THREADS and the torchrun contract are added by worker_env.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> rank_env(int local_rank) const;
};

// Throws base::InputError for impossible requests (more ranks than GPUs while binding).
Plan make_plan(const topology::Host& host, const PlanRequest& request);

// Physical cores of `cpus` on this host, each as its hardware threads. Linux numbers the SMT
// siblings of core c as c + k * cores on x86 servers; that is the rule used when the host's
// logical CPU count is a multiple of its core count, else every CPU is its own core.
std::vector<topology::IdSet> physical_cores(const topology::Host& host,
                                            const topology::IdSet& cpus);

}  // namespace gpuorch::launch

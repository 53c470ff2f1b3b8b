#pragma once
// Node rank and node count from the job manager, for static rendezvous: Slurm (one agent per
// node: SLURM_NODEID, SLURM_NNODES, SLURM_JOB_NODELIST, SLURM_JOB_ID) or a Kubernetes indexed
// Job (JOB_COMPLETION_INDEX; the node count and store address come from flags).
#include <optional>
#include <string>

#include "gpuorch/launch/worker_env.hpp"

namespace gpuorch::launch {

struct NodeEnv {
  std::string source;  // "slurm" or "kubernetes"
  int node_rank = 0;
  int nnodes = 0;           // 0 = unknown (Kubernetes: from --nnodes)
  std::string master_addr;  // Slurm: first host of the node list
  std::string run_id;       // Slurm: the job id
};

// nullopt when neither is present. Throws base::InputError on malformed values.
std::optional<NodeEnv> detect_node_env(const EnvMap& env);

// First host of a Slurm host list: "gpu[03-05,9],login1" -> "gpu03".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace gpuorch::launch

#pragma once
// The environment of one worker: the torchrun contract (RANK, LOCAL_RANK, WORLD_SIZE, ...;
// ../shared/reference/comm-launch-traces.md B1), the binding plan's device/NIC variables, an env
// file (`gpuorch tune nccl`), and the agent's own environment, which passes through (NCCL_DEBUG
// and friends). Precedence: contract > user (agent env, then env file) > plan defaults.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gpuorch/launch/plan.hpp"

namespace gpuorch::launch {

using EnvMap = std::map<std::string, std::string>;

struct WorkerIdentity {
  int local_rank = 0;
  int rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int group_rank = 0;
  int group_world_size = 1;
  int role_rank = 0;
  int role_world_size = 1;
  std::string role = "default";
  std::string master_addr;
  int master_port = 0;
  int restart_count = 0;
  int max_restarts = 0;
  std::string run_id;
  std::string error_file;
  std::string throughput_file;  // GPUORCH_THROUGHPUT_FILE; empty: not set
  bool agent_store = false;     // the store at MASTER_ADDR:MASTER_PORT is the agent's
};

// `base`: the agent's environment; `user`: KEY=VALUE pairs from --env-file (override `base`).
EnvMap worker_env(const EnvMap& base, const EnvMap& user, const Plan& plan,
                  const WorkerIdentity& who);

EnvMap current_environment();
std::vector<std::string> to_envp(const EnvMap& env);

// KEY=VALUE lines (`export KEY=VALUE`, quotes, blank lines and # comments allowed). Throws
// base::InputError "file:line: what" on anything else.
EnvMap read_env_file(const std::string& path);

}  // namespace gpuorch::launch

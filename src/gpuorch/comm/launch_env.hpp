#pragma once
// Which rank this process is, when a launcher started one process per GPU: torchrun's RANK /
// WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT, or the rank variables of Open MPI, PMI
// (MPICH, Intel MPI) and Slurm. docs/comm.md, "Several processes".
#include <functional>
#include <optional>
#include <string>

namespace gpuorch::comm {

struct LaunchEnv {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  std::string master_addr;  // where rank 0 listens for the NCCL id exchange
  int port = 0;             // MASTER_PORT (+1 under torchrun's agent store), or
                            // GPUORCH_BOOTSTRAP_PORT
  std::string source;       // "RANK/WORLD_SIZE", "OMPI_COMM_WORLD_*", "PMI_*", "SLURM_*"
};

using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// nullopt when no launcher variables are set (one process drives -g GPUs). Malformed or
// inconsistent values (RANK >= WORLD_SIZE, a port out of range, no MASTER_ADDR across nodes)
// throw base::InputError with one line naming the variable.
std::optional<LaunchEnv> detect_launch(const EnvLookup& env);
std::optional<LaunchEnv> detect_launch();  // from the process environment

}  // namespace gpuorch::comm

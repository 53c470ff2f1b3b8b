#include "gpuorch/comm/launch_env.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

#include "gpuorch/base/error.hpp"

namespace gpuorch::comm {
namespace {

struct Names {
  const char* rank;
  const char* world;
  const char* local_rank;  // may be unset: then the global rank (one node)
  const char* source;
};
// First match wins: torchrun's contract (also what a plain shell loop sets), then the launchers'.
constexpr Names kLaunchers[] = {
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "RANK/WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_*"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI_*"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_*"},
};
constexpr int kDefaultPort = 29500;  // torchrun's --master-port default

int parse_int(const EnvLookup& env, const char* name, int lo, int hi) {
  const auto v = env(name);
  if (!v) base::fail_input(fmt::format("{} is not set", name));
  int out = 0;
  const char* end = v->data() + v->size();
  const auto [p, ec] = std::from_chars(v->data(), end, out);
  if (ec != std::errc{} || p != end || out < lo || out > hi) {
    base::fail_input(fmt::format("{}={}: not an integer in {}..{}", name, *v, lo, hi));
  }
  return out;
}

// Every process of the job is on this host, so rank 0 can be reached at 127.0.0.1.
bool single_node(const EnvLookup& env, int world) {
  for (const char* n : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    if (const auto v = env(n)) return *v == std::to_string(world);
  }
  for (const char* n : {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}) {
    if (const auto v = env(n)) return *v == "1";
  }
  return false;
}

}  // namespace

std::optional<LaunchEnv> detect_launch(const EnvLookup& env) {
  const Names* found = nullptr;
  for (const auto& l : kLaunchers) {
    if (env(l.rank) && env(l.world)) {
      found = &l;
      break;
    }
  }
  if (!found) return std::nullopt;
  LaunchEnv e;
  e.source = found->source;
  e.world = parse_int(env, found->world, 1, 1 << 20);
  e.rank = parse_int(env, found->rank, 0, e.world - 1);
  e.local_rank =
      env(found->local_rank) ? parse_int(env, found->local_rank, 0, e.world - 1) : e.rank;
  if (const auto a = env("MASTER_ADDR"); a && !a->empty()) {
    e.master_addr = *a;
  } else if (e.world == 1 || single_node(env, e.world)) {
    e.master_addr = "127.0.0.1";
  } else {
    base::fail_input(fmt::format(
        "MASTER_ADDR is not set: {} ranks over several hosts need rank 0's address for the NCCL "
        "id exchange",
        e.world));
  }
  if (env("GPUORCH_BOOTSTRAP_PORT")) {
    e.port = parse_int(env, "GPUORCH_BOOTSTRAP_PORT", 1, 65535);
  } else {
    e.port = env("MASTER_PORT") ? parse_int(env, "MASTER_PORT", 1, 65534) : kDefaultPort;
    // torchrun's agent already serves its TCPStore on MASTER_PORT: take the next one.
    const auto agent_store = env("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store && (*agent_store == "True" || *agent_store == "1")) ++e.port;
  }
  return e;
}

std::optional<LaunchEnv> detect_launch() {
  return detect_launch([](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  });
}

}  // namespace gpuorch::comm

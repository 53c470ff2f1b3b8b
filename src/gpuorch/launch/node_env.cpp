#include "gpuorch/launch/node_env.hpp"

#include "gpuorch/base/error.hpp"

namespace gpuorch::launch {
namespace {

int non_negative(const EnvMap& env, const std::string& key) {
  const auto it = env.find(key);
  try {
    std::size_t used = 0;
    const int v = std::stoi(it->second, &used);
    if (used == it->second.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  base::fail_input(key + "=" + it->second + ": not a non-negative integer");
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  const auto comma = nodelist.find(',');
  const auto bracket = nodelist.find('[');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) {
    return nodelist.substr(0, comma);
  }
  const std::string stem = nodelist.substr(0, bracket);
  const auto close = nodelist.find(']', bracket);
  const std::string inside = nodelist.substr(
      bracket + 1, close == std::string::npos ? std::string::npos : close - bracket - 1);
  const auto end = inside.find_first_of("-,");
  return stem + inside.substr(0, end);
}

std::optional<NodeEnv> detect_node_env(const EnvMap& env) {
  if (env.count("SLURM_JOB_ID") && env.count("SLURM_NODEID") && env.count("SLURM_NNODES")) {
    NodeEnv n;
    n.source = "slurm";
    n.node_rank = non_negative(env, "SLURM_NODEID");
    n.nnodes = non_negative(env, "SLURM_NNODES");
    n.run_id = env.at("SLURM_JOB_ID");
    const auto list = env.count("SLURM_JOB_NODELIST") ? env.at("SLURM_JOB_NODELIST")
                      : env.count("SLURM_NODELIST")   ? env.at("SLURM_NODELIST")
                                                      : std::string();
    if (!list.empty()) n.master_addr = first_slurm_host(list);
    return n;
  }
  if (env.count("JOB_COMPLETION_INDEX")) {
    NodeEnv n;
    n.source = "kubernetes";
    n.node_rank = non_negative(env, "JOB_COMPLETION_INDEX");
    return n;
  }
  return std::nullopt;
}

}  // namespace gpuorch::launch

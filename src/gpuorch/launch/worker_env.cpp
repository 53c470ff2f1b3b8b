#include "gpuorch/launch/worker_env.hpp"

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/workload/throughput_report.hpp"

extern char** environ;

namespace gpuorch::launch {
namespace {

bool valid_name(const std::string& k) {
  if (k.empty() || (k[0] >= '0' && k[0] <= '9')) return false;
  for (const char c : k) {
    if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return true;
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return {};
  const auto b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

}  // namespace

EnvMap current_environment() {
  EnvMap env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::vector<std::string> to_envp(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

EnvMap read_env_file(const std::string& path) {
  // Bounded like every loader (base/read_file.hpp): not /dev/zero, not a FIFO, not a folder.
  base::LineReader in(path, "env file", base::kConfigFileMaxBytes);
  EnvMap env;
  std::string line;
  while (in.next(line)) {
    const std::size_t n = in.line_number();
    std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    if (t.rfind("export ", 0) == 0) t = trim(t.substr(7));
    const auto eq = t.find('=');
    if (eq == std::string::npos) base::fail_input(path, n, "expected KEY=VALUE");
    const std::string key = trim(t.substr(0, eq));
    std::string value = trim(t.substr(eq + 1));
    if (!valid_name(key)) base::fail_input(path, n, "not a variable name: " + key);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    env[key] = value;
  }
  return env;
}

EnvMap worker_env(const EnvMap& base, const EnvMap& user, const Plan& plan,
                  const WorkerIdentity& who) {
  EnvMap env = base;
  for (const auto& [k, v] : user) env[k] = v;
  auto set_default = [&](const std::string& k, const std::string& v) {
    if (!env.count(k)) env[k] = v;
  };
  // The plan owns device visibility (it is what the binding means); the NIC only if the user
  // has not chosen one.
  for (const auto& [k, v] : plan.rank_env(who.local_rank)) {
    if (k == "NCCL_IB_HCA") {
      set_default(k, v);
    } else {
      env[k] = v;
    }
  }
  const auto& b = plan.ranks.at(static_cast<std::size_t>(who.local_rank));
  set_default("OMP_NUM_THREADS", std::to_string(b.omp_threads));
  // NVLink SHARP stays off unless asked for (project rule; multicast objects misbehave on the
  // lent VMs).
  set_default("NCCL_NVLS_ENABLE", "0");
  set_default("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");

  env["RANK"] = std::to_string(who.rank);
  // torchrun --virtual-local-rank: every worker is local rank 0 of the one GPU it sees, so
  // `torch.cuda.set_device(LOCAL_RANK)` picks that GPU.
  env["LOCAL_RANK"] = std::to_string(plan.own_gpu_only ? 0 : who.local_rank);
  env["WORLD_SIZE"] = std::to_string(who.world_size);
  env["LOCAL_WORLD_SIZE"] = std::to_string(who.local_world_size);
  env["GROUP_RANK"] = std::to_string(who.group_rank);
  env["GROUP_WORLD_SIZE"] = std::to_string(who.group_world_size);
  env["ROLE_RANK"] = std::to_string(who.role_rank);
  env["ROLE_WORLD_SIZE"] = std::to_string(who.role_world_size);
  env["ROLE_NAME"] = who.role;
  env["MASTER_ADDR"] = who.master_addr;
  env["MASTER_PORT"] = std::to_string(who.master_port);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(who.restart_count);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(who.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = who.run_id;
  // False: rank 0 of the workers hosts the c10d store itself (env:// init). True (c10d with
  // PyTorch 2.x's agents): the rank-0 agent serves it and every worker connects.
  env["TORCHELASTIC_USE_AGENT_STORE"] = who.agent_store ? "True" : "False";
  if (!who.error_file.empty()) env["TORCHELASTIC_ERROR_FILE"] = who.error_file;
  if (!who.throughput_file.empty()) env[workload::kThroughputFileEnv] = who.throughput_file;
  return env;
}

}  // namespace gpuorch::launch

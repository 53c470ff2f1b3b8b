#pragma once
// The elastic agent of one node (TorchElastic's semantics, ../shared/reference B3): rendezvous,
// start the local workers, watch them every monitor interval; a failed worker stops the whole
// local group (SIGTERM, then SIGKILL after the grace period) and restarts it while restarts are
// left; a membership change restarts it without using one; SIGINT/SIGTERM are forwarded to every
// worker's process group, then escalated. Nothing the workers start outlives the agent: each
// worker's parent is its shim (shim.hpp), a subreaper that ends the worker's processes when the
// agent asks or dies; the agent is the subreaper of what escapes a shim; a guardian and the
// run's cgroup back them up (docs/launch.md, "No orphans").
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/launch/error_file.hpp"
#include "gpuorch/launch/output.hpp"
#include "gpuorch/launch/plan.hpp"
#include "gpuorch/launch/rendezvous.hpp"
#include "gpuorch/launch/throughput_reporter.hpp"
#include "gpuorch/launch/worker_env.hpp"

namespace gpuorch::launch {

struct AgentConfig {
  Plan plan;
  std::string program;            // resolved path
  std::vector<std::string> argv;  // argv[0] first
  EnvMap base_env;                // the agent's environment
  EnvMap user_env;                // --env-file
  int max_restarts = 0;
  std::chrono::milliseconds monitor_interval{100};
  std::chrono::milliseconds stop_grace{std::chrono::seconds(10)};
  std::string run_id = "none";
  std::string role = "default";
  std::string log_dir;  // empty: error files go to a private temporary folder
  bool console = true;  // worker output on the console (--quiet-workers: none)
  // torchrun's per-stream choices: redirected streams skip the console, tee'd ones carry
  // torchrun's prefix (`line_prefix_template`: TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE), the
  // others "[rank<N>]:"; only the local ranks in `console_ranks` (empty: all) reach the console.
  StdSpec redirects;
  StdSpec tee;
  std::vector<int> console_ranks;
  std::string line_prefix_template;
  // Where the job's measured throughput goes (ThroughputReporter; on Kubernetes the pod's
  // annotation). Set: the workers get GPUORCH_THROUGHPUT_FILE; empty: they do not.
  ThroughputReporter::Publish publish_throughput;
  std::chrono::seconds throughput_interval{60};
};

struct RankExit {
  int rank = 0;
  int local_rank = 0;
  int exit_code = 0;  // torch's convention: -N when killed by signal N
};

struct FailureReport {
  int rank = 0;
  int local_rank = 0;
  int exit_code = 0;
  int attempt = 0;
  std::string error_file;
  std::optional<WorkerError> error;
};

struct AgentResult {
  int exit_code = 0;           // the agent's: 0 ok, 1 workers failed, 128+N stopped by signal N
  int restarts = 0;            // failures that used a restart
  int membership_changes = 0;  // restarts for a new round (not counted)
  int attempts = 0;
  Round round;  // the last round
  int world_size = 0;
  std::vector<RankExit> exits;  // of the last attempt, local-rank order
  std::optional<FailureReport> first_failure;
  int signal = 0;
  double wall_seconds = 0;
  std::vector<std::string> warnings;  // binding steps the kernel refused, each once
};

using Log = std::function<void(const std::string&)>;

AgentResult run_agent(const AgentConfig& config, Rendezvous& rendezvous, const Log& log);

// The closing summary (stderr) and its JSON form.
std::string render_summary(const AgentConfig& config, const AgentResult& result);
std::string summary_json(const AgentConfig& config, const AgentResult& result);

}  // namespace gpuorch::launch

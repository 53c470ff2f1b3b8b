// gpuorch launch: torchrun-compatible, topology-bound, elastic launcher (docs/launch.md).
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include "cli/verbs.hpp"
#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/discover/discover.hpp"
#include "gpuorch/launch/agent.hpp"
#include "gpuorch/launch/node_env.hpp"
#include "gpuorch/launch/plan_render.hpp"
#include "gpuorch/launch/process.hpp"
#include "gpuorch/launch/rendezvous_conf.hpp"
#include "gpuorch/topology/json.hpp"
#include "gpuorch/topology/json_read.hpp"

namespace gpuorch::cli {
namespace {

struct LaunchFlags {
  std::string nnodes = "1:1";
  std::string nproc = "1";
  int node_rank = 0;
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string rdzv_id = "none";
  std::string rdzv_conf;
  int max_restarts = 0;
  bool standalone = false;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string local_addr;
  double monitor_interval = 0.1;
  double stop_grace = 10;
  std::string role = "default";
  std::string log_dir;
  std::string bind = "cores";
  std::string backend = "auto";
  bool virtual_local_rank = false;
  std::string topology_file;
  std::string sysfs_root;
  bool no_nvml = false;
  bool dry_run = false;
  bool json = false;
  bool quiet = false;
  std::vector<std::string> env_files;
  std::string summary_json;
  std::vector<std::string> program;
  // Which flags the user gave (Slurm/Kubernetes values only fill the others).
  bool given_nnodes = false, given_node_rank = false, given_master_addr = false,
       given_rdzv_id = false;
};

void log_line(const std::string& s) { fmt::print(stderr, "gpuorch launch: {}\n", s); }

std::pair<int, int> parse_nnodes(const std::string& s) {
  auto number = [&](const std::string& part) {
    try {
      std::size_t used = 0;
      const int v = std::stoi(part, &used);
      if (used == part.size() && v >= 1) return v;
    } catch (const std::exception&) {
    }
    base::fail_input("--nnodes " + s + ": expected N or MIN:MAX with 1 <= MIN <= MAX");
  };
  const auto colon = s.find(':');
  if (colon == std::string::npos) {
    const int n = number(s);
    return {n, n};
  }
  const int lo = number(s.substr(0, colon));
  const int hi = number(s.substr(colon + 1));
  if (lo > hi) base::fail_input("--nnodes " + s + ": MIN is larger than MAX");
  return {lo, hi};
}

// The host to plan for: a recorded `topo --json`, a recorded tree, or this machine limited to
// the CPUs this process may run on (a container's or a Slurm step's cpuset).
topology::Host host_for(const LaunchFlags& f) {
  if (!f.topology_file.empty()) return topology::load_host_json(f.topology_file);
  discover::Options o;
  o.use_nvml = !f.no_nvml;
  if (!f.sysfs_root.empty()) o.root = f.sysfs_root;
  auto host = discover::discover_host(o).host;
  if (f.sysfs_root.empty()) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
      topology::IdSet mine;
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &allowed)) mine.push_back(c);
      }
      host.online_cpus =
          host.online_cpus.empty() ? mine : topology::intersect(host.online_cpus, mine);
    }
  }
  return host;
}

int resolve_nproc(const std::string& s, const topology::Host& host) {
  const int gpus = static_cast<int>(host.gpus.size());
  const int cpus = host.online_cpus.empty() ? std::max(1, host.logical_cpus)
                                            : static_cast<int>(host.online_cpus.size());
  if (s == "gpu") {
    if (gpus == 0) base::fail_input("--nproc-per-node gpu: no GPU on this host");
    return gpus;
  }
  if (s == "cpu") return cpus;
  if (s == "auto") return gpus > 0 ? gpus : cpus;
  try {
    std::size_t used = 0;
    const int n = std::stoi(s, &used);
    if (used == s.size() && n >= 1) return n;
  } catch (const std::exception&) {
  }
  base::fail_input("--nproc-per-node " + s + ": expected a positive number, gpu, cpu or auto");
}

std::string random_run_id() {
  std::random_device rd;
  return fmt::format("{:08x}-{:04x}", rd(), rd() & 0xffff);
}

int run(LaunchFlags f) {
  const auto bind = launch::parse_bind_mode(f.bind);
  if (!bind) base::fail_input("--bind " + f.bind + ": not none, numa or cores");
  std::optional<launch::Backend> backend;
  if (f.backend != "auto") {
    backend = launch::parse_backend(f.backend);
    if (!backend) base::fail_input("--backend " + f.backend + ": not auto, nccl, rccl or gloo");
  }
  // Checked here, not by CLI11's Range: a NaN passes every comparison.
  const auto monitor_interval = launch::checked_seconds(
      fmt::format("--monitor-interval {}", f.monitor_interval), f.monitor_interval, 0.001, 60);
  const auto stop_grace =
      launch::checked_seconds(fmt::format("--stop-grace {}", f.stop_grace), f.stop_grace, 0, 3600);
  if (f.max_restarts < 0) base::fail_input("--max-restarts: must be >= 0");
  auto [min_nodes, max_nodes] = parse_nnodes(f.nnodes);
  const auto env = launch::current_environment();

  launch::RendezvousConfig rc;
  rc.backend = f.rdzv_backend;
  rc.endpoint = f.rdzv_endpoint;
  rc.run_id = f.rdzv_id;
  rc.node_rank = f.node_rank;
  rc.master_addr = f.master_addr;
  rc.master_port = f.master_port;
  rc.local_addr = f.local_addr;
  launch::apply_rdzv_conf(f.rdzv_conf, rc);
  std::string node_source = "flags";
  if (f.standalone) {
    if (max_nodes != 1) base::fail_input("--standalone: runs one node; drop --nnodes");
    rc.backend = "static";
    rc.master_addr = "127.0.0.1";
    rc.master_port = 0;
    rc.node_rank = 0;
    if (!f.given_rdzv_id) rc.run_id = random_run_id();
  } else if (rc.backend == "static") {
    if (const auto n = launch::detect_node_env(env)) {
      node_source = n->source;
      if (!f.given_node_rank) rc.node_rank = n->node_rank;
      if (!f.given_nnodes && n->nnodes > 0) min_nodes = max_nodes = n->nnodes;
      if (!f.given_master_addr && !n->master_addr.empty()) rc.master_addr = n->master_addr;
      if (!f.given_rdzv_id && !n->run_id.empty()) rc.run_id = n->run_id;
    }
  }
  rc.min_nodes = min_nodes;
  rc.max_nodes = max_nodes;

  const auto host = host_for(f);
  launch::PlanRequest request;
  request.nproc = resolve_nproc(f.nproc, host);
  request.bind = *bind;
  request.backend = backend;
  request.own_gpu_only = f.virtual_local_rank;
  const auto plan = launch::make_plan(host, request);

  if (f.dry_run) {
    if (f.json) {
      fmt::print("{}\n", topology::to_json_text(launch::plan_json(plan)));
    } else {
      fmt::print("{}", launch::render_plan_table(plan));
    }
    return 0;
  }
  if (f.program.empty()) {
    base::fail_input("no program given (gpuorch launch [options] -- PROGRAM ARGS)");
  }
  launch::AgentConfig config;
  config.plan = plan;
  config.program = launch::resolve_program(f.program.front());
  config.argv = f.program;
  config.base_env = env;
  for (const auto& file : f.env_files) {
    for (auto& [k, v] : launch::read_env_file(file)) config.user_env[k] = v;
  }
  config.max_restarts = f.max_restarts;
  config.monitor_interval = monitor_interval;
  config.stop_grace = stop_grace;
  config.run_id = rc.run_id;
  config.role = f.role;
  config.log_dir = f.log_dir;
  config.tee = !f.quiet;

  auto rdzv = launch::make_rendezvous(rc);
  log_line(fmt::format("{} workers on this node, backend {} (torch: {}), bind {}; rendezvous {}{}",
                       plan.ranks.size(), launch::to_string(plan.backend),
                       launch::torch_backend(plan.backend), launch::to_string(plan.bind),
                       rdzv->describe(),
                       node_source == "flags" ? "" : " (from " + node_source + ")"));
  const auto result = launch::run_agent(config, *rdzv, log_line);
  fmt::print(stderr, "{}", launch::render_summary(config, result));
  if (!f.summary_json.empty()) {
    base::write_file_atomically(f.summary_json, launch::summary_json(config, result) + "\n");
  }
  return result.exit_code;
}

}  // namespace

void add_launch(CLI::App& app, Action& action) {
  auto f = std::make_shared<LaunchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Start the workers of one node with torchrun's environment contract, each bound to its "
      "GPU, the cores and memory of that GPU's NUMA node and the nearest NIC; restart them on "
      "failure; rendezvous with other nodes statically or through etcd. See docs/launch.md.\n"
      "  gpuorch launch [options] -- PROGRAM ARGS...");
  cmd->add_option("--nnodes", f->nnodes, "Number of nodes: N or MIN:MAX (elastic, needs etcd)")
      ->capture_default_str();
  cmd->add_option("--nproc-per-node,--nproc_per_node", f->nproc,
                  "Workers on this node: N, gpu, cpu or auto")
      ->capture_default_str();
  cmd->add_option("--node-rank,--node_rank", f->node_rank,
                  "This node's rank (static rendezvous; default from Slurm/JOB_COMPLETION_INDEX, "
                  "else 0)");
  cmd->add_option("--rdzv-backend,--rdzv_backend", f->rdzv_backend, "static or etcd")
      ->capture_default_str();
  cmd->add_option("--rdzv-endpoint,--rdzv_endpoint", f->rdzv_endpoint, "etcd HOST:PORT");
  cmd->add_option("--rdzv-id,--rdzv_id", f->rdzv_id, "Job id shared by all nodes")
      ->capture_default_str();
  cmd->add_option("--rdzv-conf,--rdzv_conf", f->rdzv_conf,
                  "KEY=SECONDS,...: join_timeout (600), last_call_timeout (30), timeout "
                  "(etcd connect, 30), lease_ttl (10)");
  cmd->add_option("--max-restarts,--max_restarts", f->max_restarts,
                  "Restarts of the local workers after a failure")
      ->capture_default_str();
  cmd->add_flag("--standalone", f->standalone,
                "Single node, store on a free localhost port, random run id");
  cmd->add_option("--master-addr,--master_addr", f->master_addr,
                  "Workers' store host (static rendezvous)")
      ->capture_default_str();
  cmd->add_option("--master-port,--master_port", f->master_port,
                  "Workers' store port (static rendezvous)")
      ->capture_default_str();
  cmd->add_option("--local-addr,--local_addr", f->local_addr,
                  "This node's address for the store when it is node 0 (etcd; default: the "
                  "address facing etcd)");
  cmd->add_option("--monitor-interval,--monitor_interval", f->monitor_interval,
                  "Seconds between checks of the workers")
      ->capture_default_str();
  cmd->add_option("--stop-grace", f->stop_grace,
                  "Seconds between SIGTERM and SIGKILL when stopping workers")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--role", f->role, "ROLE_NAME of the workers")->capture_default_str();
  cmd->add_option("--log-dir,--log_dir", f->log_dir,
                  "Per-rank stdout.log/stderr.log/error.json under "
                  "DIR/<run id>/attempt_<k>/<local rank>/");
  cmd->add_option("--bind", f->bind, "none, numa or cores")->capture_default_str();
  cmd->add_option("--backend", f->backend,
                  "auto (NCCL on NVIDIA, RCCL on AMD, Gloo without GPUs), nccl, rccl or gloo")
      ->capture_default_str();
  cmd->add_flag("--virtual-local-rank", f->virtual_local_rank,
                "Each worker sees only its own GPU (as device 0)");
  cmd->add_option("--topology", f->topology_file,
                  "Plan for a recorded host (`gpuorch topo --json` output)");
  cmd->add_option("--sysfs-root", f->sysfs_root,
                  "Plan for a recorded tree (`gpuorch topo --record`)");
  cmd->add_flag("--no-nvml", f->no_nvml, "Do not use NVML to find GPUs");
  cmd->add_flag("--dry-run", f->dry_run, "Print the binding plan and exit");
  cmd->add_flag("--json", f->json, "With --dry-run: the plan as JSON");
  cmd->add_flag("--quiet-workers", f->quiet,
                "Do not copy worker output to the console (still in --log-dir)");
  cmd->add_option("--env-file", f->env_files,
                  "KEY=VALUE lines for every worker (e.g. from `gpuorch tune nccl`); repeatable")
      ->allow_extra_args(false);
  cmd->add_option("--summary-json", f->summary_json, "Also write the closing summary as JSON");
  cmd->add_option("program", f->program, "PROGRAM ARGS... (after --)");
  cmd->callback([f, cmd, &action] {
    f->given_nnodes = cmd->count("--nnodes") > 0;
    f->given_node_rank = cmd->count("--node-rank") > 0;
    f->given_master_addr = cmd->count("--master-addr") > 0;
    f->given_rdzv_id = cmd->count("--rdzv-id") > 0;
    action = [f] { return run(*f); };
  });
}

}  // namespace gpuorch::cli

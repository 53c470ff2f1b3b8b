// gpuorch launch: torchrun-compatible, topology-bound, elastic launcher (docs/launch.md).
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string_view>

#include "cli/verbs.hpp"
#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/base/log.hpp"
#include "gpuorch/discover/discover.hpp"
#include "gpuorch/k8s/launch/throughput_annotation.hpp"
#include "gpuorch/launch/agent.hpp"
#include "gpuorch/launch/node_env.hpp"
#include "gpuorch/launch/plan_render.hpp"
#include "gpuorch/launch/process.hpp"
#include "gpuorch/launch/rendezvous_conf.hpp"
#include "gpuorch/topology/json.hpp"
#include "gpuorch/topology/json_read.hpp"

namespace gpuorch::cli {
namespace {

// Put in front of a program that came without `--` (mark_launch_program).
constexpr const char* kTorchrunFormFlag = "--gpuorch-torchrun-form";

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
  bool module = false;
  bool no_python = false;
  bool torchrun_form = false;  // the program came without `--`: torchrun's `SCRIPT ARGS`
  std::string redirects = "0";
  std::string tee = "0";
  std::string local_ranks_filter;
  std::string topology_file;
  std::string sysfs_root;
  bool no_nvml = false;
  bool dry_run = false;
  bool json = false;
  bool quiet = false;
  std::vector<std::string> env_files;
  std::string summary_json;
  std::string kubeconfig;  // where the throughput annotation is patched from (empty: in-cluster)
  std::vector<std::string> program;
  // Which flags the user gave (Slurm/Kubernetes values only fill the others).
  bool given_nnodes = false, given_node_rank = false, given_master_addr = false,
       given_rdzv_id = false;
};

// klog lines (base/log.hpp). launch::Log carries no severity or source line yet, so every line
// is info from here; the agent's own file:line needs launch::Log to become a base::LogSink.
void launch_log(const std::string& s) { base::log_info(s); }

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

// torchrun's options that also read PET_<NAME> (Kubeflow's PyTorchJob sets them), by the name
// argparse gives them (--nproc-per-node: nproc_per_node). A gpuorch option having one of these
// names reads the variable when the flag is not given.
constexpr std::string_view kTorchrunEnvOptions[] = {"nnodes",
                                                    "nproc_per_node",
                                                    "rdzv_backend",
                                                    "rdzv_endpoint",
                                                    "rdzv_id",
                                                    "rdzv_conf",
                                                    "standalone",
                                                    "max_restarts",
                                                    "monitor_interval",
                                                    "start_method",
                                                    "event_log_handler",
                                                    "role",
                                                    "module",
                                                    "no_python",
                                                    "run_path",
                                                    "log_dir",
                                                    "redirects",
                                                    "tee",
                                                    "local_ranks_filter",
                                                    "duplicate_stdout_filters",
                                                    "duplicate_stderr_filters",
                                                    "node_rank",
                                                    "master_addr",
                                                    "master_port",
                                                    "local_addr",
                                                    "signals_to_handle",
                                                    "shutdown_timeout",
                                                    "virtual_local_rank"};

void read_torchrun_environment(CLI::App& cmd) {
  for (CLI::Option* opt : cmd.get_options()) {
    for (std::string name : opt->get_lnames()) {
      std::replace(name.begin(), name.end(), '-', '_');
      if (std::find(std::begin(kTorchrunEnvOptions), std::end(kTorchrunEnvOptions), name) ==
          std::end(kTorchrunEnvOptions)) {
        continue;
      }
      std::string var = "PET_";
      for (const char c : name)
        var += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      opt->envname(var);
      break;
    }
  }
}

// The command each worker runs: torchrun's `python -u SCRIPT ARGS` / `python -u -m MODULE
// ARGS` (the interpreter: $PYTHON_EXEC, else python3 from PATH), or the program as given
// (--no-python, or gpuorch's `-- PROGRAM ARGS`).
std::vector<std::string> worker_command(const LaunchFlags& f, const launch::EnvMap& env) {
  if (f.module && f.no_python) {
    base::fail_input("-m/--module and --no-python exclude each other (a module needs python)");
  }
  if (f.program.empty() || f.no_python || (!f.module && !f.torchrun_form)) return f.program;
  const auto exec = env.find("PYTHON_EXEC");
  std::vector<std::string> argv{
      exec != env.end() && !exec->second.empty() ? exec->second : "python3", "-u"};
  if (f.module) argv.emplace_back("-m");
  argv.insert(argv.end(), f.program.begin(), f.program.end());
  return argv;
}

// --redirects/--tee without --log-dir: torchrun keeps the files in a fresh temporary folder.
std::string temporary_log_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "gpuorch-logs-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) base::fail_input("cannot create a log folder in /tmp");
  return pattern;
}

bool any_stream(const launch::StdSpec& s) {
  if (s.all) return *s.all != 0;
  return std::any_of(s.by_local_rank.begin(), s.by_local_rank.end(),
                     [](const auto& kv) { return kv.second != 0; });
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
  const auto redirects = launch::parse_std_spec("--redirects", f.redirects);
  const auto tee = launch::parse_std_spec("--tee", f.tee);
  const auto console_ranks =
      launch::parse_local_ranks("--local-ranks-filter", f.local_ranks_filter);
  const auto command = worker_command(f, env);

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
      if (!command.empty()) fmt::print("command: {}\n", fmt::join(command, " "));
    }
    return 0;
  }
  if (command.empty()) {
    base::fail_input("no program given (gpuorch launch [options] -- PROGRAM ARGS)");
  }
  launch::AgentConfig config;
  config.plan = plan;
  config.program = launch::resolve_program(command.front());
  config.argv = command;
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
  config.console = !f.quiet;
  config.redirects = redirects;
  config.tee = tee;
  config.console_ranks = console_ranks;
  if (const auto t = env.find("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"); t != env.end()) {
    config.line_prefix_template = t->second;
  }
  if (config.log_dir.empty() && (any_stream(redirects) || any_stream(tee))) {
    config.log_dir = temporary_log_dir();
    launch_log(
        fmt::format("worker logs in {} (--redirects/--tee without --log-dir)", config.log_dir));
  }

  // In a pod (or with --kubeconfig): the job's measured throughput on the pod's annotation.
  std::string no_annotation;
  std::shared_ptr<k8s::ThroughputAnnotation> annotation =
      k8s::ThroughputAnnotation::from_environment(
          f.kubeconfig.empty() ? std::nullopt : std::optional<std::string>(f.kubeconfig),
          [&env](const char* key) {
            const auto it = env.find(key);
            return it == env.end() ? std::string() : it->second;
          },
          no_annotation);
  if (annotation) {
    launch_log(fmt::format("throughput: step reports ({}) published on {}",
                           workload::kThroughputFileEnv, annotation->describe()));
    config.publish_throughput = [annotation](const workload::ThroughputReport& r) {
      annotation->publish(r);
    };
  } else if (!f.kubeconfig.empty() || env.count("KUBERNETES_SERVICE_HOST") > 0) {
    launch_log(fmt::format("throughput: not published ({})", no_annotation));
  }

  rc.local_world_size = static_cast<int>(plan.ranks.size());
  rc.role = f.role;
  auto rdzv = launch::make_rendezvous(rc);
  launch_log(
      fmt::format("{} workers on this node, backend {} (torch: {}), bind {}; rendezvous {}{}",
                  plan.ranks.size(), launch::to_string(plan.backend),
                  launch::torch_backend(plan.backend), launch::to_string(plan.bind),
                  rdzv->describe(), node_source == "flags" ? "" : " (from " + node_source + ")"));
  const auto result = launch::run_agent(config, *rdzv, launch_log);
  fmt::print(stderr, "{}", launch::render_summary(config, result));
  if (!f.summary_json.empty()) {
    base::write_file_atomically(f.summary_json, launch::summary_json(config, result) + "\n");
  }
  return result.exit_code;
}

}  // namespace

void mark_launch_program(const CLI::App& app, std::vector<std::string>& args) {
  if (args.empty() || args.front() != "launch") return;
  const CLI::App* cmd = app.get_subcommand("launch");
  // Whether option token `a` takes the next token as its value.
  const auto takes_value = [&](const std::string& name) {
    const CLI::Option* opt = cmd->get_option_no_throw(name);
    return opt != nullptr && opt->get_items_expected_min() > 0;
  };
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return;
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      if (a.find('=') == std::string::npos && takes_value(a)) ++i;
      continue;
    }
    if (a.size() > 1 && a[0] == '-') {
      if (a.size() == 2 && takes_value(a)) ++i;
      continue;
    }
    // The first word that is no option nor an option's value: torchrun's SCRIPT.
    args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), {kTorchrunFormFlag, "--"});
    return;
  }
}

void add_launch(CLI::App& app, Action& action) {
  auto f = std::make_shared<LaunchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Start the workers of one node with torchrun's environment contract, each bound to its "
      "GPU, the cores and memory of that GPU's NUMA node and the nearest NIC; restart them on "
      "failure; rendezvous with other nodes statically or through etcd. See docs/launch.md.\n"
      "  gpuorch launch [options] SCRIPT.py ARGS...     (torchrun's form: python -u SCRIPT.py)\n"
      "  gpuorch launch [options] -m MODULE ARGS...     (python -u -m MODULE)\n"
      "  gpuorch launch [options] --no-python PROGRAM ARGS...\n"
      "  gpuorch launch [options] -- PROGRAM ARGS...    (run as given)");
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
  cmd->add_option("--stop-grace,--shutdown-timeout,--shutdown_timeout", f->stop_grace,
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
  cmd->add_flag("--virtual-local-rank,--virtual_local_rank", f->virtual_local_rank,
                "Each worker sees only its own GPU, as device 0, and gets LOCAL_RANK=0");
  cmd->add_flag("-m,--module", f->module, "Run SCRIPT as a Python module: python -u -m MODULE");
  cmd->add_flag("--no-python,--no_python", f->no_python,
                "Run the program directly, not through python");
  cmd->add_option("-r,--redirects", f->redirects,
                  "Worker streams to the log files only: 0 none, 1 stdout, 2 stderr, 3 both; "
                  "or per local rank, 0:1,1:2")
      ->capture_default_str();
  cmd->add_option("-t,--tee", f->tee,
                  "Worker streams to the log files and the console, prefixed [<role><local "
                  "rank>]: (same values as --redirects)")
      ->capture_default_str();
  cmd->add_option("--local-ranks-filter,--local_ranks_filter", f->local_ranks_filter,
                  "Only these local ranks' output on the console (0,1,2); log files keep all");
  cmd->add_flag(kTorchrunFormFlag, f->torchrun_form)->group("");
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
  cmd->add_option("--kubeconfig", f->kubeconfig,
                  "Publish the job's measured throughput on pod $POD_NAME with these credentials "
                  "(default in a pod: its service account; docs/launch.md)");
  cmd->add_option("program", f->program, "SCRIPT ARGS... (torchrun's form) or -- PROGRAM ARGS...");
  read_torchrun_environment(*cmd);
  cmd->callback([f, cmd, &action] {
    f->given_nnodes = cmd->count("--nnodes") > 0;
    f->given_node_rank = cmd->count("--node-rank") > 0;
    f->given_master_addr = cmd->count("--master-addr") > 0;
    f->given_rdzv_id = cmd->count("--rdzv-id") > 0;
    action = [f] { return run(*f); };
  });
}

}  // namespace gpuorch::cli

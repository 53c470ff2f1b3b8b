// gpuorch doctor: the troubleshooting table as checks that run. Each sub-check prints its findings
// one line each (or --json); exit 0 when all is well, 1 when a problem was found, 2 on bad usage.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>

#include "cli/doctor_catalogue.hpp"
#include "cli/doctor_measure.hpp"
#include "cli/verbs.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/discover/diagnostics.hpp"
#include "gpuorch/discover/discover.hpp"
#include "gpuorch/discover/tree.hpp"
#include "gpuorch/doctor/finding.hpp"
#include "gpuorch/doctor/nccl_log.hpp"
#include "gpuorch/doctor/nccl_log_check.hpp"
#include "gpuorch/doctor/network.hpp"
#include "gpuorch/doctor/numa.hpp"
#include "gpuorch/doctor/pending.hpp"
#include "gpuorch/doctor/queue.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/launch/worker_env.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/topology/json_read.hpp"

namespace gpuorch::cli {
namespace {

struct DoctorFlags {
  bool json = false;
  std::string nccl_log;
  std::string calibration;
  std::string root = "/";
  std::vector<std::string> env_files;
  bool no_process_env = false;
  std::string topology;
  std::string kubelet_config;
  std::string pod;
  std::string kubeconfig;
  std::string objects;
  std::string policy = "efd";
  std::uint64_t seed = 42;
  std::string topology_levels;
  std::string queue;
  std::string scheduler_name = "gpuorch";
  bool no_preemption = false;
};

bool is_comm_env(const std::string& key) {
  return key.rfind("NCCL_", 0) == 0 || key.rfind("RCCL_", 0) == 0;
}

// What the job's NCCL would see: this environment, then the env files over it (the launcher's
// precedence, docs/launch.md).
void read_env(const DoctorFlags& f, std::map<std::string, std::string>& env, std::string& source) {
  std::vector<std::string> sources;
  if (!f.no_process_env) {
    for (const auto& [k, v] : launch::current_environment()) {
      if (is_comm_env(k)) env[k] = v;
    }
    sources.emplace_back("environment");
  }
  for (const auto& file : f.env_files) {
    for (const auto& [k, v] : launch::read_env_file(file)) {
      if (is_comm_env(k)) env[k] = v;
    }
    sources.push_back("env file " + file);
  }
  source = sources.empty() ? std::string("no environment")
                           : fmt::format("{}", fmt::join(sources, " + "));
}

// The live host or a recording; problems reading it go to stderr, once each.
struct HostTree {
  discover::Diagnostics diag;
  discover::Tree tree;
  explicit HostTree(const std::string& root) : tree(checked(root), &diag) {}
  static std::string checked(const std::string& root) {
    if (!std::filesystem::is_directory(root)) base::fail_input(root, 0, "not a directory");
    return root;
  }
  void warn() const {
    for (const auto& p : diag.problems()) fmt::print(stderr, "gpuorch: warning: {}\n", p);
  }
  [[nodiscard]] std::string input() const {
    return tree.live() ? std::string("live host") : "recorded tree " + tree.root().string();
  }
};

int run_nccl_log(const DoctorFlags& f) {
  const auto log = doctor::read_nccl_log(f.nccl_log);
  const auto options =
      f.calibration.empty() ? doctor::NcclCheckOptions{} : doctor::read_calibration(f.calibration);
  return print_findings({{"nccl-log", f.nccl_log, doctor::check_nccl_log(log, options)}}, f.json);
}

int run_network(const DoctorFlags& f) {
  HostTree host(f.root);
  auto state = doctor::read_network_state(host.tree);
  read_env(f, state.env, state.env_source);
  auto findings = doctor::check_network(state);
  host.warn();
  return print_findings({{"network", host.input(), std::move(findings)}}, f.json);
}

int run_numa(const DoctorFlags& f) {
  std::vector<doctor::Report> reports;
  if (f.root != "/" || f.kubelet_config.empty() || !f.topology.empty()) {
    HostTree tree(f.root);
    topology::Host host;
    if (!f.topology.empty()) {
      host = topology::load_host_json(f.topology);
    } else {
      discover::Options o;
      o.root = f.root;
      auto d = discover::discover_host(o);
      for (const auto& p : d.problems) fmt::print(stderr, "gpuorch: warning: {}\n", p);
      host = std::move(d.host);
    }
    const auto procs = doctor::find_gpu_processes(tree.tree);
    tree.warn();
    reports.push_back({"numa", tree.input(), doctor::check_numa(host, procs)});
  }
  if (!f.kubelet_config.empty()) {
    reports.push_back(
        {"kubelet", f.kubelet_config, doctor::check_kubelet_config(f.kubelet_config)});
  }
  return print_findings(reports, f.json);
}

// The scheduler's options, read as `gpuorch scheduler` reads them, so both decide alike.
k8s::MirrorOptions mirror_options(const DoctorFlags& f) {
  k8s::MirrorOptions o;
  std::string spec(sched::canonical_policy_name(f.policy.substr(0, f.policy.find(':'))));
  if (const auto colon = f.policy.find(':'); colon != std::string::npos) {
    spec += f.policy.substr(colon);
  }
  sched::check_policy_spec(spec);
  o.policy = spec;
  o.seed = f.seed;
  std::istringstream levels(f.topology_levels);
  for (std::string key; std::getline(levels, key, ',');) {
    if (key.empty()) base::fail_input("--topology-levels: an empty label key");
    o.topology_levels.push_back(key);
  }
  return o;
}

int run_host(const DoctorFlags& f) {
  HostTree host(f.root);
  auto state = doctor::read_network_state(host.tree);
  read_env(f, state.env, state.env_source);
  discover::Options o;
  o.root = f.root;
  auto d = discover::discover_host(o);
  const auto procs = doctor::find_gpu_processes(host.tree);
  std::vector<doctor::Report> reports{{"network", host.input(), doctor::check_network(state)},
                                      {"numa", host.input(), doctor::check_numa(d.host, procs)}};
  for (const auto& p : d.problems) fmt::print(stderr, "gpuorch: warning: {}\n", p);
  host.warn();
  return print_findings(reports, f.json);
}

// The cluster for doctor pod and doctor queue: a List saved with kubectl, or the API server.
std::pair<doctor::ClusterObjects, std::string> cluster_objects(const DoctorFlags& f, bool queues) {
  if (!f.objects.empty()) {
    const std::string text =
        base::read_input_file(f.objects, "object list", base::kTraceFileMaxBytes);
    nlohmann::json list;
    try {
      list = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      base::fail_input(f.objects, 0, fmt::format("not JSON ({})", e.what()));
    }
    return {doctor::cluster_from_list(list, f.objects), f.objects};
  }
  const std::optional<std::string> kubeconfig =
      f.kubeconfig.empty() ? std::nullopt : std::optional<std::string>(f.kubeconfig);
  k8s::ApiClient api(k8s::load_cluster_config(kubeconfig));
  return {doctor::list_cluster(api, queues), api.config().server};
}

int run_pod(const DoctorFlags& f) {
  const auto options = mirror_options(f);
  if (!f.pod.empty() && f.pod.find('/') == std::string::npos) {
    base::fail_input(fmt::format("pod '{}': expected NAMESPACE/NAME", f.pod));
  }
  const auto [objects, input] = cluster_objects(f, false);
  return print_findings({{"pod", input, doctor::explain_pending(objects, f.pod, options)}}, f.json);
}

int run_queue(const DoctorFlags& f) {
  doctor::QueueOptions options;
  options.mirror = mirror_options(f);
  options.scheduler_name = f.scheduler_name;
  options.preemption = !f.no_preemption;
  const auto [objects, input] = cluster_objects(f, true);
  return print_findings({{"queue", input, doctor::explain_queues(objects, f.queue, options)}},
                        f.json);
}

// Where doctor pod and doctor queue read the cluster, and the scheduler flags their verdicts
// follow.
void add_cluster_flags(CLI::App& cmd, DoctorFlags& f, const std::string& kinds) {
  cmd.add_option("--kubeconfig", f.kubeconfig,
                 "kubeconfig file (default: $KUBECONFIG, else in-cluster, else ~/.kube/config)");
  cmd.add_option("--objects", f.objects,
                 fmt::format("Read the cluster from `kubectl get {} -A -o json` output instead of "
                             "an API server",
                             kinds));
  cmd.add_option("--policy", f.policy, "Placement policy, as gpuorch scheduler --policy")
      ->capture_default_str();
  cmd.add_option("--seed", f.seed, "Tie-break seed, as gpuorch scheduler --seed")
      ->capture_default_str();
  cmd.add_option("--topology-levels", f.topology_levels,
                 "Node label keys gangs are kept under, as gpuorch scheduler --topology-levels");
}

void add_root(CLI::App& cmd, DoctorFlags& f) {
  cmd.add_option("--sysfs-root", f.root,
                 "Read a recorded tree (gpuorch topo --record, or a copy of /sys and /proc) "
                 "instead of the live host")
      ->capture_default_str();
}

void add_json(CLI::App& cmd, DoctorFlags& f) {
  cmd.add_flag("--json", f.json, "Print the findings as JSON (schema gpuorch.doctor/v1)");
}

}  // namespace

int print_findings(const std::vector<doctor::Report>& reports, bool json) {
  if (json) {
    // Process names come from /proc and may hold any bytes: invalid UTF-8 is replaced.
    fmt::print("{}\n", doctor::to_json(reports).dump(
                           2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  } else {
    fmt::print("{}", doctor::render_text(reports));
  }
  return doctor::exit_code(reports);
}

void add_doctor(CLI::App& app, Action& action) {
  auto f = std::make_shared<DoctorFlags>();
  CLI::App* doctor = app.add_subcommand(
      "doctor",
      "Explain problems: each check prints one line per finding (severity, what is wrong, the "
      "evidence, the fix). Exit 0: all well, 1: a problem found, 2: bad usage. See "
      "docs/doctor.md.");
  doctor->require_subcommand(0, 1);
  add_root(*doctor, *f);
  add_json(*doctor, *f);
  // Bare `gpuorch doctor`: the checks that need nothing but the host (network, numa).
  doctor->callback([f, doctor, &action] {
    if (doctor->get_subcommands().empty()) action = [f] { return run_host(*f); };
  });

  CLI::App* nccl = doctor->add_subcommand(
      "nccl-log",
      "Read an NCCL_DEBUG=INFO log (NCCL, RCCL, PyTorch ProcessGroupNCCL; any prefixes: torchrun, "
      "mpirun, kubectl, container runtime): every line NCCL's catalogue knows, with its cause and "
      "fix; transport per peer and why (P2P, SHM, NET/IB with or without GPUDirect, NET/Socket "
      "fallback), settings that switch a fast path off and their cost, collective timeouts and "
      "which rank stopped.");
  nccl->add_option("FILE", f->nccl_log, "The log (any job output that holds NCCL's lines)")
      ->required();
  nccl->add_option("--calibration", f->calibration,
                   "A `gpuorch tune nccl --calibration` file: settings that switch P2P off or "
                   "force NCCL_ALGO / NCCL_PROTO are reported with the cost measured there")
      ->check(CLI::ExistingFile);
  add_json(*nccl, *f);
  nccl->callback([f, &action] { action = [f] { return run_nccl_log(*f); }; });

  CLI::App* net = doctor->add_subcommand(
      "network",
      "Check what NCCL needs from this host's network: RDMA ports (state, rate, link layer, as "
      "ibv_devinfo shows them), nvidia-peermem for GPUDirect RDMA, the memlock limit, and that "
      "NCCL_SOCKET_IFNAME / NCCL_IB_HCA name devices that exist.");
  add_root(*net, *f);
  net->add_option("--env-file", f->env_files,
                  "The launcher's env file (gpuorch launch --env-file, gpuorch tune nccl "
                  "--output); read over this environment")
      ->check(CLI::ExistingFile);
  net->add_flag("--no-process-env", f->no_process_env,
                "Ignore this process's NCCL_*/RCCL_* variables (only the env files count)");
  add_json(*net, *f);
  net->callback([f, &action] { action = [f] { return run_network(*f); }; });

  CLI::App* numa = doctor->add_subcommand(
      "numa",
      "For each process with a GPU open (/proc/PID/fd -> /dev/nvidiaN), compare its CPU affinity "
      "(Cpus_allowed_list) and memory (numa_maps) with its GPUs' NUMA node and local cores; with "
      "--kubelet-config, check the kubelet's CPU, Topology and Memory Manager policies.");
  add_root(*numa, *f);
  numa->add_option("--topology", f->topology,
                   "The host as `gpuorch topo --json` wrote it, instead of discovering it")
      ->check(CLI::ExistingFile);
  numa->add_option("--kubelet-config", f->kubelet_config,
                   "The kubelet's KubeletConfiguration file (only this is checked unless "
                   "--sysfs-root or --topology is given too)");
  add_json(*numa, *f);
  numa->callback([f, &action] { action = [f] { return run_numa(*f); }; });

  CLI::App* pod = doctor->add_subcommand(
      "pod",
      "Why a pod is Pending, in the scheduler core's words on the cluster's current state (the "
      "explanation `gpuorch scheduler` writes): which nodes lack what, labels and taints that "
      "exclude nodes, gang members missing, and whether it is waiting or infeasible. Any "
      "scheduler's pods. Without NS/NAME: every unbound pod.");
  pod->add_option("NS/NAME", f->pod, "The pod (default: every unbound pod)");
  add_cluster_flags(*pod, *f, "nodes,pods,podgroups");
  add_json(*pod, *f);
  pod->callback([f, &action] { action = [f] { return run_pod(*f); }; });

  CLI::App* queue = doctor->add_subcommand(
      "queue",
      "A queue's quota, limit, over-quota weight, fair share now and what its pods hold and ask "
      "for, and why each of its waiting jobs waits (over its limit, over its fair share, its "
      "share held by others, fragmented, infeasible) or which pods it would preempt: the "
      "verdicts of `gpuorch scheduler --queues` on the cluster's current state. Without NAME: "
      "every queue.");
  queue->add_option("NAME", f->queue, "The queue (and the queues under it); default: every queue");
  add_cluster_flags(*queue, *f, "nodes,pods,podgroups,queues");
  queue
      ->add_option("--scheduler-name", f->scheduler_name,
                   "Whose pending pods are the queues' jobs, as gpuorch scheduler "
                   "--scheduler-name")
      ->capture_default_str();
  queue->add_flag("--no-preemption", f->no_preemption,
                  "As gpuorch scheduler --no-preemption: jobs never preempt");
  add_json(*queue, *f);
  queue->callback([f, &action] { action = [f] { return run_queue(*f); }; });

  add_doctor_measure(*doctor, action);
  add_doctor_catalogue(*doctor, action);
}

}  // namespace gpuorch::cli

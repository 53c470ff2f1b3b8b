// gpuorch dra-driver: the node side of Dynamic Resource Allocation (docs/dra.md): publishes the
// node's GPUs as a ResourceSlice and serves the kubelet's DRA plugin API.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/discovery_flags.hpp"
#include "cli/k8s_flags.hpp"
#include "cli/verbs.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/subprocess.hpp"
#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/dra/driver_server.hpp"
#include "gpuorch/k8s/dra/gpu_config.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "gpuorch/k8s/dra/slice_publisher.hpp"
#include "gpuorch/topology/json_read.hpp"

namespace gpuorch::cli {
namespace {

using namespace std::chrono_literals;

struct DraFlags {
  std::string topology;
  DiscoveryFlags discover;
  std::string node_name, kubeconfig;
  std::string driver = k8s::dra::kDriverName;
  std::string registry_dir = "/var/lib/kubelet/plugins_registry";
  std::string plugin_dir;  // default /var/lib/kubelet/plugins/<driver>
  std::string cdi_dir = "/var/run/cdi";
  std::string dev_root = "/dev";
  int resync_s = 60;
  bool dry_run = false;
  std::string nvidia_smi = "nvidia-smi";
  std::string mps_control = "nvidia-cuda-mps-control";
  double mps_timeout_s = 10;
  std::string prepare_file, unprepare_file;
};

void dra_log(const std::string& line) { fmt::print(stderr, "gpuorch dra-driver: {}\n", line); }

// --node-name, else NODE_NAME (the DaemonSet's downward API), else the host name.
std::string node_name(const DraFlags& f) {
  if (!f.node_name.empty()) return f.node_name;
  if (const char* env = std::getenv("NODE_NAME"); env != nullptr && *env != '\0') return env;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "localhost";
  return host;
}

topology::Host load_host(const DraFlags& f) {
  if (!f.topology.empty()) return topology::load_host_json(f.topology);
  return discover_with_warnings(f.discover).host;
}

// A bare name is looked up on PATH now; none found leaves it empty (the preparer says so when a
// claim needs it).
std::string resolved_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  return base::find_in_path(name).value_or("");
}

k8s::dra::PreparerOptions preparer_options(const DraFlags& f, const std::string& pool,
                                           const std::string& plugin_dir) {
  k8s::dra::PreparerOptions po;
  po.cdi = {f.driver, f.cdi_dir, f.dev_root};
  po.pool = pool;
  po.checkpoint_path = (std::filesystem::path(plugin_dir) / "checkpoint.json").string();
  po.log = dra_log;
  po.nvidia_smi.path = resolved_program(f.nvidia_smi);
  po.mps.control = f.mps_control;
  po.mps.timeout = std::chrono::milliseconds(static_cast<long long>(f.mps_timeout_s * 1000));
  std::error_code ec;
  std::filesystem::create_directories(plugin_dir, ec);
  return po;
}

// --prepare-file / --unprepare-file: what the kubelet's call does, for the claim in a file,
// without a kubelet or an API server (a node's own check, the hardware record of docs/dra.md).
int run_local(const DraFlags& f, const topology::Host& host, const std::string& pool,
              const std::string& plugin_dir) {
  const std::string& path = f.prepare_file.empty() ? f.unprepare_file : f.prepare_file;
  const std::string text = base::read_input_file(path, "ResourceClaim", base::kConfigFileMaxBytes);
  nlohmann::json claim;
  try {
    claim = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    base::fail_input(path, 0, fmt::format("not JSON ({})", e.what()));
  }
  const auto meta = claim.is_object() ? claim.value("metadata", nlohmann::json::object())
                                      : nlohmann::json::object();
  const k8s::dra::ClaimRef ref{meta.value("namespace", std::string("default")),
                               meta.value("uid", std::string()), meta.value("name", std::string())};
  if (const auto why = k8s::dra::check_claim_ref(ref); !why.empty()) {
    base::fail_input(path, 0, "metadata: " + why);
  }
  k8s::dra::ClaimPreparer preparer(
      host, preparer_options(f, pool, plugin_dir),
      [&claim](const std::string&, const std::string&) { return claim; });
  try {
    if (!f.prepare_file.empty()) {
      for (const auto& d : preparer.prepare(ref)) {
        fmt::print("{} {}\n", d.device, fmt::join(d.cdi_device_ids, ","));
      }
    } else {
      preparer.unprepare(ref);
    }
  } catch (const k8s::dra::ConfigError& e) {
    base::fail_input(path, 0, e.what());
  } catch (const std::exception& e) {
    dra_log(e.what());
    return 1;
  }
  return 0;
}

int run_dra_driver(const DraFlags& f) {
  const topology::Host host = load_host(f);
  k8s::dra::SliceOptions so;
  so.driver = f.driver;
  so.node_name = node_name(f);
  const nlohmann::json slice = k8s::dra::resource_slice(host, so);
  if (f.dry_run) {
    fmt::print("{}\n", slice.dump(2));
    return 0;
  }
  const std::string plugin_dir =
      f.plugin_dir.empty() ? "/var/lib/kubelet/plugins/" + f.driver : f.plugin_dir;
  if (!f.prepare_file.empty() || !f.unprepare_file.empty()) {
    return run_local(f, host, so.node_name, plugin_dir);
  }
  const std::optional<std::string> kubeconfig =
      f.kubeconfig.empty() ? std::nullopt : std::optional<std::string>(f.kubeconfig);
  std::atomic<bool> stop{false};
  const std::jthread signals = stop_on_signals(stop);
  k8s::ApiClientOptions ao;
  ao.cancel = &stop;
  k8s::ApiClient api(k8s::load_cluster_config(kubeconfig), ao);

  const k8s::dra::PreparerOptions po = preparer_options(f, so.node_name, plugin_dir);
  k8s::dra::ClaimPreparer preparer(
      host, po, [&api](const std::string& ns, const std::string& name) {
        return api.get(k8s::namespaced_path(k8s::dra::kResourceApi, ns, "resourceclaims", name));
      });
  preparer.restore_sharing();
  k8s::dra::DriverServer server(preparer, {f.driver, f.registry_dir, plugin_dir, 128, dra_log});
  dra_log(fmt::format("{} device(s) of {} on node {}; {} claim(s) prepared before",
                      slice["spec"]["devices"].size(), host.hostname, so.node_name,
                      preparer.prepared().size()));
  // The slice is checked again every resync: one deleted by hand, or by the kubelet when the
  // driver was away, comes back.
  auto next = std::chrono::steady_clock::now();
  while (!stop) {
    if (std::chrono::steady_clock::now() >= next) {
      try {
        const auto change = k8s::dra::publish_slice(api, slice);
        if (change != k8s::dra::SliceChange::kUnchanged) {
          dra_log(fmt::format("ResourceSlice {} {}", slice["metadata"]["name"].get<std::string>(),
                              k8s::dra::to_string(change)));
        }
        next = std::chrono::steady_clock::now() + std::chrono::seconds(f.resync_s);
      } catch (const std::exception& e) {
        dra_log(fmt::format("publishing the ResourceSlice: {} (retrying in 5 s)", e.what()));
        next = std::chrono::steady_clock::now() + 5s;
      }
    }
    std::this_thread::sleep_for(200ms);
  }
  dra_log("stopping: removing the sockets");
  return 0;
}

}  // namespace

void add_dra_driver(CLI::App& app, Action& action) {
  auto f = std::make_shared<DraFlags>();
  CLI::App* cmd = app.add_subcommand(
      "dra-driver",
      "Kubelet DRA driver (resource.k8s.io/v1, kubelet DRA API v1): publishes this node's GPUs as "
      "a ResourceSlice with topology attributes and prepares claims through CDI. See "
      "docs/dra.md.");
  cmd->add_option("--topology", f->topology,
                  "Static inventory: the JSON of `gpuorch topo --json` instead of live discovery");
  add_discovery_flags(cmd, f->discover, "Discover a recorded tree instead of this host");
  cmd->add_option("--node-name", f->node_name,
                  "This node's name: the slice's node and pool (default: $NODE_NAME, else the "
                  "host name)");
  cmd->add_option("--kubeconfig", f->kubeconfig,
                  "kubeconfig (default: $KUBECONFIG, else the in-cluster service account)");
  cmd->add_option("--driver-name", f->driver, "The DRA driver name (DeviceClass selectors use it)")
      ->capture_default_str();
  cmd->add_option("--plugins-registry", f->registry_dir,
                  "The kubelet's plugin registration directory (the registration socket)")
      ->capture_default_str();
  cmd->add_option("--plugin-dir", f->plugin_dir,
                  "The driver's directory: dra.sock and checkpoint.json (default: "
                  "/var/lib/kubelet/plugins/DRIVER)");
  cmd->add_option("--cdi-dir", f->cdi_dir, "Where the CDI spec of each prepared claim is written")
      ->capture_default_str();
  cmd->add_option(
         "--dev-root", f->dev_root,
         "The host's /dev as seen here (a CDI spec names only the device nodes that exist)")
      ->capture_default_str();
  cmd->add_option("--resync-s", f->resync_s, "How often the published slice is checked")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->add_flag("--dry-run", f->dry_run, "Print the ResourceSlice that would be published, exit");
  cmd->add_option("--nvidia-smi", f->nvidia_smi,
                  "nvidia-smi, for claims whose GpuConfig asks TimeSlicing (and MPS's compute "
                  "mode); a bare name is looked up on PATH")
      ->capture_default_str();
  cmd->add_option("--mps-control", f->mps_control,
                  "The MPS control program a claim whose GpuConfig asks MPS gets a daemon of; a "
                  "bare name is looked up on PATH")
      ->capture_default_str();
  cmd->add_option("--mps-timeout-s", f->mps_timeout_s,
                  "How long an MPS command, and a daemon's start or stop, may take")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  auto* prep = cmd->add_option(
      "--prepare-file", f->prepare_file,
      "Prepare the allocated ResourceClaim in this JSON file (kubectl get resourceclaim -o json) "
      "as the kubelet would, with no kubelet or API server; print its devices and CDI IDs, exit");
  auto* unprep = cmd->add_option("--unprepare-file", f->unprepare_file,
                                 "Unprepare the ResourceClaim in this JSON file, exit");
  prep->excludes(unprep);
  cmd->callback([f, &action] { action = [f] { return run_dra_driver(*f); }; });
}

}  // namespace gpuorch::cli

// gpuorch node-labeller: GFD-compatible GPU labels and gpuorch's topology annotation on this
// node, kept true as the device-plugin config and the hardware change (docs/labeller.md).
#include "gpuorch/k8s/labeller/node_labeller.hpp"

#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <optional>

#include "cli/k8s_flags.hpp"
#include "cli/verbs.hpp"
#include "discovery_flags.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/base/log.hpp"
#include "gpuorch/discover/discover.hpp"
#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/topology/json_read.hpp"

namespace gpuorch::cli {
namespace {

struct LabellerFlags {
  std::string kubeconfig, node_name, config_file, mig_strategy, topology, output_file;
  DiscoveryFlags discover;
  bool once = false, dry_run = false;
  double interval = 60;
};

// SIGHUP asks for a refresh now; a signal handler may only touch a lock-free atomic.
std::atomic<bool> g_wake{false};
extern "C" void on_hup(int) { g_wake = true; }

std::string env_or(const std::string& value, const char* name) {
  if (!value.empty()) return value;
  const char* env = std::getenv(name);
  return env != nullptr ? env : "";
}

int run(LabellerFlags f) {
  if (!(f.interval >= 0.1 && f.interval <= 86400)) {
    base::fail_input("--interval must be between 0.1 and 86400 seconds");
  }
  k8s::LabellerOptions o;
  o.node_name = f.dry_run ? "" : env_or(f.node_name, "NODE_NAME");
  o.config_file = env_or(f.config_file, "CONFIG_FILE");
  o.output_file = f.output_file;
  o.interval = std::chrono::milliseconds(static_cast<std::int64_t>(f.interval * 1000));
  if (!f.mig_strategy.empty()) {
    const auto strategy = k8s::parse_mig_strategy(f.mig_strategy);
    o.overrides = [strategy](k8s::PluginConfig& c) { c.mig_strategy = strategy; };
  }
  if (!f.topology.empty()) {
    o.host = [path = f.topology] { return topology::load_host_json(path); };
  } else {
    o.host = [d = f.discover] { return discover_with_warnings(d).host; };
  }
  o.log = base::log;
  if (f.dry_run) {
    fmt::print("{}", k8s::feature_file(k8s::NodeLabeller(nullptr, o).compute()));
    return 0;
  }
  if (o.node_name.empty() && o.output_file.empty()) {
    base::fail_input(
        "no node to label: give --node-name (or set NODE_NAME), --output-file or --dry-run");
  }
  // SIGTERM ends a call in flight at once instead of after its request timeout.
  std::atomic<bool> stop{false};
  std::unique_ptr<k8s::ApiClient> api;
  if (!o.node_name.empty()) {
    try {
      k8s::require_dns1123_subdomain(o.node_name, "--node-name");
    } catch (const k8s::InvalidName& e) {
      base::fail_input(e.what());
    }
    const auto kubeconfig =
        f.kubeconfig.empty() ? std::nullopt : std::optional<std::string>(f.kubeconfig);
    k8s::ApiClientOptions api_options;
    api_options.cancel = &stop;
    api = std::make_unique<k8s::ApiClient>(k8s::load_cluster_config(kubeconfig), api_options);
  }
  k8s::NodeLabeller labeller(api.get(), o);
  if (f.once) {
    labeller.refresh();
    return 0;
  }
  std::signal(SIGHUP, on_hup);
  const auto waiter = stop_on_signals(stop);
  base::log_info(fmt::format(
      "labelling {} every {} s{}", o.node_name.empty() ? o.output_file : o.node_name, f.interval,
      o.config_file.empty() ? "" : ", and when " + o.config_file + " changes"));
  labeller.run(stop, g_wake);
  return 0;
}

}  // namespace

void add_node_labeller(CLI::App& app, Action& action) {
  auto flags = std::make_shared<LabellerFlags>();
  CLI::App* cmd = app.add_subcommand(
      "node-labeller",
      "Keep this node's GPU labels true: GPU Feature Discovery's nvidia.com/* labels (sharing and "
      "MIG included, from the device plugin's config), gpuorch.io/* labels and the topology "
      "annotation, refreshed every interval and when the config changes. See docs/labeller.md.");
  cmd->add_option("--kubeconfig", flags->kubeconfig,
                  "kubeconfig file (default: $KUBECONFIG, else the in-cluster service account)");
  cmd->add_option("--node-name", flags->node_name, "Node to label (default: $NODE_NAME)");
  cmd->add_option("--config-file", flags->config_file,
                  "The device plugin's config (NVIDIA's format; default: $CONFIG_FILE, else none)");
  cmd->add_option("--mig-strategy", flags->mig_strategy,
                  "none, single or mixed; wins over the config file's flags.migStrategy");
  cmd->add_option("--interval", flags->interval, "Seconds between refreshes")
      ->capture_default_str();
  cmd->add_flag("--once", flags->once, "Label once and exit");
  cmd->add_flag("--dry-run,--print", flags->dry_run,
                "Print the labels (key=value) and annotations (# lines); no API server");
  cmd->add_option(
      "--output-file,-o", flags->output_file,
      "Also write the labels as an NFD local feature file (what GFD's --output-file writes)");
  cmd->add_option("--topology", flags->topology,
                  "Read the host from a `gpuorch topo --json` file instead of discovering it");
  add_discovery_flags(cmd, flags->discover,
                      "Read a recorded tree (gpuorch topo --record) instead of the live host");
  cmd->callback([flags, &action] { action = [flags] { return run(*flags); }; });
}

}  // namespace gpuorch::cli

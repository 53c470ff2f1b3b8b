// gpuorch device-plugin: the kubelet device plugin for NVIDIA and AMD GPUs (docs/device-plugin.md).
// Also the hidden `gpuorch kubelet-harness`, the kubelet's side used by the hardware check.
#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <csignal>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/nvidia_plugin_flags.hpp"
#include "cli/verbs.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/discover/discover.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/deviceplugin/plugin_server.hpp"
#include "gpuorch/k8s/deviceplugin/wire.hpp"
#include "gpuorch/k8s/kubelet/fake_kubelet.hpp"
#include "gpuorch/topology/json_read.hpp"

namespace gpuorch::cli {
namespace {

using namespace std::chrono_literals;

struct PluginFlags {
  std::string topology, sysfs_root = "/", nvml_library = "libnvidia-ml.so.1";
  NvidiaPluginFlags nvidia;  // NVIDIA's own flags and variables (docs/device-plugin.md)
  std::string directory = "/var/lib/kubelet/device-plugins/";
  std::string vendor = "all", health_file;
  int health_interval_ms = 5000;
  bool no_nvml = false, dry_run = false;
  // Allocate follows the scheduler when the node is named (docs/device-plugin.md).
  std::string kubeconfig, node_name;
  bool follow_scheduler = true;
};

// The signal handler's only way to the running plugin (a signal carries no context).
std::atomic<k8s::PluginManager*> g_running{nullptr};

extern "C" void on_stop_signal(int) {
  if (auto* m = g_running.load()) m->stop();
}

extern "C" void on_hangup_signal(int) {
  if (auto* m = g_running.load()) m->reload();
}

void plugin_log(const std::string& l) { fmt::print(stderr, "gpuorch device-plugin: {}\n", l); }

// The config with flags and variables applied, its warnings (what it sets that has no effect)
// said once each.
k8s::PluginConfig effective_config(const PluginFlags& f) {
  auto c = f.nvidia.effective_config();
  for (const auto& w : c.warnings) plugin_log("warning: " + w);
  return c;
}

k8s::VendorFilter vendor_filter(const std::string& v) {
  if (v == "nvidia") return k8s::VendorFilter::kNvidia;
  if (v == "amd") return k8s::VendorFilter::kAmd;
  return k8s::VendorFilter::kAll;
}

nlohmann::ordered_json plan_json(const topology::Host& host,
                                 const std::vector<k8s::Resource>& resources,
                                 const k8s::HealthState& health) {
  auto j = nlohmann::ordered_json::array();
  for (const auto& r : resources) {
    nlohmann::ordered_json rj;
    rj["resource"] = r.name;
    rj["endpoint"] = r.socket_name();
    rj["sharing"] = k8s::to_string(r.sharing);
    rj["replicas"] = r.replicas;
    rj["devices"] = nlohmann::ordered_json::array();
    const auto list = k8s::device_list(host, r, health);
    for (const auto& d : list.devices()) {
      nlohmann::ordered_json dj;
      dj["id"] = d.id();
      dj["health"] = d.health();
      auto numa = nlohmann::ordered_json::array();
      for (const auto& n : d.topology().nodes()) numa.push_back(n.id());
      dj["numa_nodes"] = numa;
      rj["devices"].push_back(dj);
    }
    j.push_back(rj);
  }
  return j;
}

int run_plugin(const PluginFlags& f) {
  auto config = effective_config(f);
  std::unique_ptr<discover::Nvml> keep_nvml;
  topology::Host host;
  if (!f.topology.empty()) {
    host = topology::load_host_json(f.topology);
  } else {
    discover::Options o;
    o.root = f.sysfs_root;
    o.use_nvml = !f.no_nvml;
    o.nvml_library = f.nvml_library;
    auto d = discover::discover_host(o);
    for (const auto& p : d.problems) fmt::print(stderr, "gpuorch: warning: {}\n", p);
    host = std::move(d.host);
  }
  std::vector<k8s::Resource> resources;
  try {
    resources = k8s::plan_resources(host, config, vendor_filter(f.vendor));
  } catch (const base::InputError& e) {
    // NVIDIA's --fail-on-init-error=false: an init error leaves the plugin up and idle.
    if (config.fail_on_init_error || f.dry_run) throw;
    plugin_log(fmt::format("{}: serving nothing (fail-on-init-error is false)", e.what()));
  }
  if (f.dry_run) {
    const k8s::HealthState health;
    fmt::print("{}\n", plan_json(host, resources, health).dump(2));
    return 0;
  }
  if (resources.empty()) {
    if (config.fail_on_init_error) {
      fmt::print(stderr, "gpuorch: device-plugin: no GPU to advertise on {} ({})\n", host.hostname,
                 f.topology.empty() ? "live discovery" : f.topology);
      return 1;
    }
    plugin_log("no devices found: waiting indefinitely (fail-on-init-error is false)");
  }
  k8s::PluginOptions options;
  options.directory = f.directory;
  if (config.kubelet_socket) options.kubelet_socket = *config.kubelet_socket;
  // SIGHUP: the file and the variables read again; a config that does not load or does not fit
  // this host is one line, and the running one stays.
  options.reload = [&f, &host]() -> std::optional<k8s::PluginPlan> {
    try {
      auto c = effective_config(f);
      auto r = k8s::plan_resources(host, c, vendor_filter(f.vendor));
      return k8s::PluginPlan{std::move(c), std::move(r)};
    } catch (const base::InputError& e) {
      plugin_log(fmt::format("SIGHUP: {}", e.what()));
      return std::nullopt;
    }
  };
  // The pods' recorded GPUs come from the API server: the node's name from --node-name or
  // NODE_NAME (the DaemonSet's downward API), credentials from --kubeconfig or in-cluster.
  std::string node_name = f.node_name;
  if (node_name.empty()) {
    if (const char* env = std::getenv("NODE_NAME")) node_name = env;
  }
  std::unique_ptr<k8s::ApiClient> api;
  std::unique_ptr<k8s::ScheduledAllocations> scheduled;
  if (f.follow_scheduler && !node_name.empty()) {
    const std::optional<std::string> kubeconfig =
        f.kubeconfig.empty() ? std::nullopt : std::optional<std::string>(f.kubeconfig);
    api = std::make_unique<k8s::ApiClient>(k8s::load_cluster_config(kubeconfig));
    scheduled = std::make_unique<k8s::ScheduledAllocations>(
        *api, node_name,
        [](const std::string& l) { fmt::print(stderr, "gpuorch device-plugin: {}\n", l); });
    options.scheduled = scheduled.get();
  }
  // Constructed first: a bad plugin directory is the one line a failing start prints.
  k8s::PluginManager manager(host, config, std::move(resources), options);
  if (scheduled) {
    fmt::print(stderr,
               "gpuorch device-plugin: Allocate follows the GPUs recorded on pods bound to {} "
               "({})\n",
               node_name, api->config().server);
  } else {
    fmt::print(stderr,
               "gpuorch device-plugin: no node name (--node-name, NODE_NAME): Allocate keeps the "
               "kubelet's devices\n");
  }
  // The manager keeps its own copy of the host; health sources watch that one.
  std::unique_ptr<k8s::HealthFileWatcher> file_watch;
  if (!f.health_file.empty()) {
    file_watch = std::make_unique<k8s::HealthFileWatcher>(f.health_file, manager.health());
  }
  std::unique_ptr<k8s::LiveHealthMonitor> live;
  if (f.topology.empty()) {
    k8s::LiveHealthMonitor::Options lo;
    lo.sysfs_root = f.sysfs_root;
    lo.use_nvml = !f.no_nvml && f.sysfs_root == "/";
    lo.nvml_library = f.nvml_library;
    lo.interval = std::chrono::milliseconds(f.health_interval_ms);
    live = std::make_unique<k8s::LiveHealthMonitor>(
        host, manager.health(), lo,
        [](const std::string& l) { fmt::print(stderr, "gpuorch device-plugin: {}\n", l); });
    fmt::print(stderr, "gpuorch device-plugin: health: {}\n", live->description());
  }
  g_running = &manager;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  struct sigaction hup {};
  hup.sa_handler = on_hangup_signal;
  sigemptyset(&hup.sa_mask);
  ::sigaction(SIGHUP, &hup, nullptr);
  const int rc = manager.run();
  g_running = nullptr;
  fmt::print(stderr, "gpuorch device-plugin: stopped\n");
  return rc;
}

// ---- kubelet-harness ---------------------------------------------------------------------------

struct HarnessFlags {
  std::string directory;
  int registrations = 1;
  int size = 0;  // 0: every healthy device
  int timeout_s = 60;
};

nlohmann::json proto_json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return nlohmann::json::parse(out);
}

int run_harness(const HarnessFlags& f) {
  k8s::FakeKubelet kubelet(f.directory);
  kubelet.start();
  fmt::print(stderr, "kubelet-harness: serving Registration on {}/kubelet.sock\n", f.directory);
  if (!kubelet.wait_registrations(static_cast<std::size_t>(f.registrations),
                                  std::chrono::seconds(f.timeout_s))) {
    fmt::print(stderr, "kubelet-harness: {} registration(s) expected, {} seen in {} s\n",
               f.registrations, kubelet.registrations().size(), f.timeout_s);
    return 1;
  }
  nlohmann::json out;
  out["registrations"] = nlohmann::json::array();
  out["resources"] = nlohmann::json::array();
  int failures = 0;
  for (const auto& reg : kubelet.registrations()) {
    out["registrations"].push_back(proto_json(reg));
    auto stub = kubelet.connect(reg.endpoint());
    nlohmann::json r;
    r["resource"] = reg.resource_name();
    {
      grpc::ClientContext ctx;
      v1beta1::Empty e;
      v1beta1::DevicePluginOptions o;
      const auto s = stub->GetDevicePluginOptions(&ctx, e, &o);
      r["options"] = s.ok() ? proto_json(o) : nlohmann::json(s.error_message());
    }
    k8s::DeviceWatch watch(*stub);
    if (!watch.wait_updates(1, 10s)) {
      r["error"] = "no ListAndWatch message in 10 s";
      ++failures;
      out["resources"].push_back(r);
      continue;
    }
    const auto list = watch.updates().front();
    r["list_and_watch"] = proto_json(list);
    v1beta1::PreferredAllocationRequest preq;
    auto* c = preq.add_container_requests();
    for (const auto& d : list.devices()) {
      if (d.health() == k8s::kHealthy) c->add_available_deviceids(d.id());
    }
    const int size = f.size > 0 ? std::min(f.size, c->available_deviceids_size())
                                : c->available_deviceids_size();
    c->set_allocation_size(size);
    v1beta1::PreferredAllocationResponse presp;
    {
      grpc::ClientContext ctx;
      const auto s = stub->GetPreferredAllocation(&ctx, preq, &presp);
      r["preferred_request"] = proto_json(preq);
      r["preferred"] = s.ok() ? proto_json(presp) : nlohmann::json(s.error_message());
      if (!s.ok()) ++failures;
    }
    v1beta1::AllocateRequest areq;
    auto* ac = areq.add_container_requests();
    if (presp.container_responses_size() > 0) {
      for (const auto& id : presp.container_responses(0).deviceids()) ac->add_devices_ids(id);
    }
    v1beta1::AllocateResponse aresp;
    {
      grpc::ClientContext ctx;
      const auto s = stub->Allocate(&ctx, areq, &aresp);
      r["allocate_request"] = proto_json(areq);
      r["allocate"] = s.ok() ? proto_json(aresp) : nlohmann::json(s.error_message());
      if (!s.ok()) ++failures;
    }
    watch.cancel();
    out["resources"].push_back(r);
  }
  fmt::print("{}\n", out.dump(2));
  return failures == 0 ? 0 : 1;
}

}  // namespace

void add_device_plugin(CLI::App& app, Action& action) {
  auto f = std::make_shared<PluginFlags>();
  CLI::App* cmd = app.add_subcommand(
      "device-plugin",
      "Kubelet device plugin (API v1beta1) for NVIDIA and AMD GPUs, with time-slicing, MPS and MIG "
      "sharing configured like NVIDIA's plugin. See docs/device-plugin.md.");
  cmd->add_option("--topology", f->topology,
                  "Static inventory: the JSON of `gpuorch topo --json` instead of live discovery");
  cmd->add_option("--sysfs-root", f->sysfs_root, "Discover a recorded tree instead of this host")
      ->capture_default_str();
  f->nvidia.add_to(*cmd);
  cmd->add_option("--device-plugin-path", f->directory,
                  "The kubelet's device plugin directory (kubelet.sock and our sockets)")
      ->capture_default_str();
  cmd->add_option("--vendor", f->vendor, "Which GPUs to advertise")
      ->check(CLI::IsMember({"all", "nvidia", "amd"}))
      ->capture_default_str();
  cmd->add_option("--health-file", f->health_file,
                  "A file of unhealthy devices (GPU/MIG UUID, index or PCI address per line), "
                  "watched while running");
  cmd->add_option("--health-interval-ms", f->health_interval_ms,
                  "How often live health checks sysfs")
      ->check(CLI::Range(50, 600000))
      ->capture_default_str();
  cmd->add_flag("--no-nvml", f->no_nvml, "Do not use NVML (discovery and XID events)");
  cmd->add_option("--nvml-library", f->nvml_library, "NVML shared library to dlopen")
      ->capture_default_str();
  cmd->add_flag("--dry-run", f->dry_run,
                "Print the resources and devices that would be advertised (JSON) and exit");
  cmd->add_option("--node-name", f->node_name,
                  "This node's name: Allocate hands out the GPUs a gpuorch scheduler recorded on "
                  "the pod (default: $NODE_NAME; none: the kubelet's devices)");
  cmd->add_option("--kubeconfig", f->kubeconfig,
                  "kubeconfig for reading the node's pods (default: $KUBECONFIG, else in-cluster)");
  cmd->add_flag("!--no-follow-scheduler", f->follow_scheduler,
                "Never look up pods: Allocate keeps the kubelet's devices");
  cmd->callback([f, &action] { action = [f] { return run_plugin(*f); }; });

  auto h = std::make_shared<HarnessFlags>();
  CLI::App* harness = app.add_subcommand(
      "kubelet-harness",
      "Act as the kubelet for a device plugin: serve Registration in DIR, then for every "
      "registered resource call GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation and "
      "Allocate, and print the exchange as JSON");
  harness->group("");  // hidden: a test tool, not a user verb
  harness->add_option("--dir", h->directory, "Device plugin directory")->required();
  harness->add_option("--registrations", h->registrations, "Registrations to wait for")
      ->capture_default_str();
  harness->add_option("--size", h->size, "Devices per preferred allocation (0: all healthy)")
      ->capture_default_str();
  harness->add_option("--timeout-s", h->timeout_s, "How long to wait for registrations")
      ->capture_default_str();
  harness->callback([h, &action] { action = [h] { return run_harness(*h); }; });
}

}  // namespace gpuorch::cli

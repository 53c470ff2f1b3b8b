// gpuorch manifests: the YAML that deploys gpuorch on a Kubernetes cluster (docs/manifests.md).
#include "gpuorch/k8s/manifests/manifests.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/verbs.hpp"
#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/error.hpp"

namespace gpuorch::cli {
namespace {

struct ManifestFlags {
  k8s::ManifestOptions options;
  std::string sharing = "none";
  std::string mig_strategy = "none";
  std::vector<std::string> node_selector, tolerations, requests, limits;
  std::string out;
  bool json = false;
  bool no_scheduler = false;
  bool no_podgroup_crd = false;
  bool no_queue_crd = false;
};

int run(ManifestFlags f) {
  if (f.sharing == "time-slicing") {
    f.options.sharing = k8s::SharingKind::kTimeSlicing;
  } else if (f.sharing == "mps") {
    f.options.sharing = k8s::SharingKind::kMps;
  }
  if (f.mig_strategy != "none" && f.mig_strategy != "single" && f.mig_strategy != "mixed") {
    base::fail_input(fmt::format("--mig-strategy '{}': use none, single or mixed", f.mig_strategy));
  }
  f.options.mig_strategy = k8s::parse_mig_strategy(f.mig_strategy);
  for (const auto& s : f.node_selector) {
    f.options.pod.node_selector.push_back(k8s::parse_node_selector(s));
  }
  for (const auto& t : f.tolerations) f.options.pod.tolerations.push_back(k8s::parse_toleration(t));
  for (const auto& r : f.requests) k8s::parse_resources(r, "--requests", f.options.pod.resources);
  for (const auto& r : f.limits) k8s::parse_resources(r, "--limits", f.options.pod.resources);
  f.options.scheduler = !f.no_scheduler;
  f.options.podgroup_crd = !f.no_podgroup_crd;
  f.options.queue_crd = !f.no_queue_crd;
  const auto manifests = k8s::make_manifests(f.options);
  const auto text = [&](const k8s::Manifest& m) {
    return f.json ? m.object.dump(2) + "\n" : k8s::to_yaml(m.object);
  };
  if ((f.out.empty() || f.out == "-") && f.json) {
    auto all = nlohmann::ordered_json::array();
    for (const auto& m : manifests) all.push_back(m.object);
    fmt::print("{}\n", all.dump(2));
    return 0;
  }
  if (f.out.empty() || f.out == "-") {
    for (std::size_t i = 0; i < manifests.size(); ++i) {
      if (!f.json) fmt::print("---\n");
      fmt::print("# {}\n", manifests[i].file);
      fmt::print("{}", text(manifests[i]));
    }
    return 0;
  }
  std::error_code ec;
  std::filesystem::create_directories(f.out, ec);
  if (ec || !std::filesystem::is_directory(f.out)) {
    base::fail_input(fmt::format("{}: cannot create the output directory", f.out));
  }
  for (const auto& m : manifests) {
    std::string name = m.file;
    if (f.json) name = name.substr(0, name.rfind('.')) + ".json";
    base::write_file_atomically((std::filesystem::path(f.out) / name).string(), text(m));
  }
  fmt::print(stderr, "gpuorch manifests: {} objects written to {} (kubectl apply -f {})\n",
             manifests.size(), f.out, f.out);
  return 0;
}

}  // namespace

void add_manifests(CLI::App& app, Action& action) {
  auto f = std::make_shared<ManifestFlags>();
  CLI::App* cmd = app.add_subcommand(
      "manifests",
      "Print the Kubernetes YAML that deploys gpuorch: device plugin DaemonSet(s) and sharing "
      "ConfigMap, exporter DaemonSet + Service, node labeller, the scheduler Deployment (2 "
      "replicas, leader election) with the PodGroup CRD, and least-privilege RBAC. Every "
      "component is included by default. See docs/manifests.md.");
  cmd->add_option("--image", f->options.image, "gpuorch container image")->capture_default_str();
  cmd->add_option("--mps-image", f->options.mps_image,
                  "CUDA image with nvidia-cuda-mps-control (--sharing mps)")
      ->capture_default_str();
  cmd->add_option("--namespace", f->options.ns, "Namespace for everything namespaced")
      ->capture_default_str();
  cmd->add_option("--vendor", f->options.vendor, "Device plugins for nvidia, amd or both")
      ->check(CLI::IsMember({"nvidia", "amd", "both"}))
      ->capture_default_str();
  cmd->add_option("--sharing", f->sharing, "GPU sharing in the ConfigMap")
      ->check(CLI::IsMember({"none", "time-slicing", "mps"}))
      ->capture_default_str();
  cmd->add_option("--replicas", f->options.replicas, "Replicas per GPU when sharing (>= 2)")
      ->capture_default_str();
  // One value per flag, the flag given as often as needed (values may hold commas).
  const auto repeatable = [cmd](const char* flag, std::vector<std::string>& into,
                                const std::string& help, const char* type) {
    cmd->add_option(flag, into, help)
        ->type_name(type)
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };
  cmd->add_option("--mig-strategy", f->mig_strategy,
                  "none, single or mixed: the NVIDIA plugin's flags.migStrategy and the "
                  "labeller's; other than none, the NVIDIA plugin and labeller containers get "
                  "NVIDIA_MIG_MONITOR_DEVICES=all and CAP_SYS_ADMIN")
      ->capture_default_str();
  repeatable("--image-pull-secret", f->options.pod.image_pull_secrets,
             "Secret for pulling the images (imagePullSecrets of every pod); repeatable", "NAME");
  cmd->add_option("--image-pull-policy", f->options.pod.image_pull_policy,
                  "Always, IfNotPresent or Never, on every container (default: not set, so "
                  "Kubernetes decides: Always for :latest, else IfNotPresent)");
  repeatable("--node-selector", f->node_selector,
             "Run the node agents (DaemonSets) only on nodes with this label, in addition "
             "to their own GPU-node selection; repeatable",
             "KEY=VALUE");
  repeatable("--toleration", f->tolerations,
             "Toleration added to the node agents (DaemonSets), in kubectl taint's spelling: "
             "KEY=VALUE:EFFECT (Equal), KEY:EFFECT or KEY:Exists:EFFECT (any value); EFFECT "
             "is NoSchedule, PreferNoSchedule or NoExecute; repeatable",
             "TAINT");
  repeatable("--requests", f->requests,
             "Container requests of one component (device-plugin, exporter, node-labeller, "
             "mps-control-daemon, scheduler), replacing its defaults for the resources named "
             "(cpu, memory, ephemeral-storage); repeatable. Defaults: " +
                 k8s::default_resources_text(),
             "COMPONENT:cpu=100m,memory=128Mi");
  repeatable("--limits", f->limits, "Container limits of one component, as --requests",
             "COMPONENT:memory=256Mi");
  cmd->add_option("--runtime-class", f->options.pod.runtime_class,
                  "runtimeClassName of the pods that use NVIDIA's runtime (e.g. nvidia, where "
                  "it is not containerd's default runtime)")
      ->type_name("NAME");
  cmd->add_flag("--no-scheduler", f->no_scheduler,
                "Leave out the gpuorch scheduler (included by default): its Deployment, "
                "ServiceAccount, RBAC and the PodGroup CRD");
  cmd->add_flag("--no-podgroup-crd", f->no_podgroup_crd,
                "Leave out 00-podgroup-crd.yaml, the PodGroup CRD podgroups.scheduling.x-k8s.io "
                "(included with the scheduler by default), when scheduler-plugins installed it");
  cmd->add_flag("--no-queue-crd", f->no_queue_crd,
                "Leave out 00-queue-crd.yaml, the Queue CRD queues.scheduling.run.ai (included "
                "with the scheduler by default), when KAI-Scheduler installed it");
  cmd->add_flag("--dra", f->options.dra,
                "The DRA driver instead of the device plugin DaemonSets: gpuorch dra-driver's "
                "DaemonSet, RBAC for ResourceSlices and the DeviceClasses gpu.gpuorch.io and "
                "mig.gpuorch.io (docs/dra.md)");
  cmd->add_flag("--kueue", f->options.kueue,
                "Add gpuorch admission-check for Kueue: its Deployment (two replicas, leader "
                "election), RBAC, and the AdmissionCheck gpuorch-placeable a ClusterQueue lists "
                "(Kueue's CRDs must be installed first; docs/kueue.md)");
  cmd->add_option("-o,--output", f->out, "Write one file per object into DIR (default: stdout)");
  cmd->add_flag("--json", f->json, "JSON instead of YAML");
  cmd->callback([f, &action] { action = [f] { return run(*f); }; });
}

}  // namespace gpuorch::cli

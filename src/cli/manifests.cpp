// gpuorch manifests: the YAML that deploys gpuorch on a Kubernetes cluster (docs/manifests.md).
#include "gpuorch/k8s/manifests.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "cli/verbs.hpp"
#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/error.hpp"

namespace gpuorch::cli {
namespace {

struct ManifestFlags {
  k8s::ManifestOptions options;
  std::string sharing = "none";
  std::string out;
  bool json = false;
  bool no_scheduler = false;
  bool no_podgroup_crd = false;
};

int run(ManifestFlags f) {
  if (f.sharing == "time-slicing") {
    f.options.sharing = k8s::SharingKind::kTimeSlicing;
  } else if (f.sharing == "mps") {
    f.options.sharing = k8s::SharingKind::kMps;
  }
  f.options.scheduler = !f.no_scheduler;
  f.options.podgroup_crd = !f.no_podgroup_crd;
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
  cmd->add_option("--kubectl-image", f->options.kubectl_image,
                  "Image with kubectl for the node labeller")
      ->capture_default_str();
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
  cmd->add_flag("--no-scheduler", f->no_scheduler,
                "Leave out the gpuorch scheduler (included by default): its Deployment, "
                "ServiceAccount, RBAC and the PodGroup CRD");
  cmd->add_flag("--no-podgroup-crd", f->no_podgroup_crd,
                "Leave out 00-podgroup-crd.yaml, the PodGroup CRD podgroups.scheduling.x-k8s.io "
                "(included with the scheduler by default), when scheduler-plugins installed it");
  cmd->add_option("-o,--output", f->out, "Write one file per object into DIR (default: stdout)");
  cmd->add_flag("--json", f->json, "JSON instead of YAML");
  cmd->callback([f, &action] { action = [f] { return run(*f); }; });
}

}  // namespace gpuorch::cli

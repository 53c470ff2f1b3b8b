#include "gpuorch/k8s/launch/throughput_annotation.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "gpuorch/base/error.hpp"
#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"

namespace gpuorch::k8s {
namespace {

ApiClientOptions short_calls() {
  // The agent's monitor loop waits for the patch: a slow server costs it seconds, not minutes.
  ApiClientOptions o;
  o.connect_timeout = std::chrono::milliseconds(2000);
  o.request_timeout = std::chrono::milliseconds(5000);
  o.max_body_bytes = std::size_t{4} << 20;
  return o;
}

}  // namespace

ThroughputAnnotation::ThroughputAnnotation(ClusterConfig config, std::string ns, std::string pod)
    : ns_(std::move(ns)),
      pod_(std::move(pod)),
      path_(pod_path(ns_, pod_)),
      api_(std::make_unique<ApiClient>(std::move(config), short_calls())) {}

void ThroughputAnnotation::publish(const workload::ThroughputReport& report) {
  const nlohmann::json patch = {
      {"metadata",
       {{"annotations", {{workload::kThroughputAnnotation, workload::to_annotation(report)}}}}}};
  api_->patch(path_, patch);
}

std::string ThroughputAnnotation::describe() const {
  return fmt::format("pod {}/{} (annotation {}, {})", ns_, pod_, workload::kThroughputAnnotation,
                     api_->config().source);
}

std::unique_ptr<ThroughputAnnotation> ThroughputAnnotation::from_environment(
    const std::optional<std::string>& kubeconfig,
    const std::function<std::string(const char*)>& get_env, std::string& why) {
  const std::string pod = get_env("POD_NAME");
  if (pod.empty()) {
    why = "POD_NAME is not set (the downward API's metadata.name)";
    return nullptr;
  }
  ClusterConfig config;
  if (kubeconfig) {
    config = load_kubeconfig(*kubeconfig);
  } else if (!get_env("KUBERNETES_SERVICE_HOST").empty() &&
             std::filesystem::exists("/var/run/secrets/kubernetes.io/serviceaccount/token")) {
    config = in_cluster_config();
  } else {
    why = "no service account token and no --kubeconfig";
    return nullptr;
  }
  std::string ns = get_env("POD_NAMESPACE");
  if (ns.empty()) ns = config.default_namespace.empty() ? "default" : config.default_namespace;
  try {
    return std::make_unique<ThroughputAnnotation>(std::move(config), ns, pod);
  } catch (const InvalidName& e) {
    base::fail_input(fmt::format("POD_NAME/POD_NAMESPACE: {}", e.what()));
  }
}

}  // namespace gpuorch::k8s

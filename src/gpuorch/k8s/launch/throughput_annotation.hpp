#pragma once
// `gpuorch launch` in a pod: the job's measured throughput (launch/throughput_reporter.hpp) goes
// onto the launcher's own pod as the annotation gpuorch.io/throughput (one merge patch), where
// `gpuorch scheduler --queues` reads it. The pod is POD_NAME in POD_NAMESPACE (the downward
// API); the credentials are the pod's service account, or an explicit kubeconfig
// (`gpuorch launch --kubeconfig`, for a launcher outside the pod it speaks for). It needs
// `patch` on pods in its namespace (docs/launch.md, "Throughput on Kubernetes").
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/workload/throughput_report.hpp"

namespace gpuorch::k8s {

class ThroughputAnnotation {
 public:
  ThroughputAnnotation(ClusterConfig config, std::string ns, std::string pod);
  // The annotation patched in; throws ApiError or std::runtime_error when that fails.
  void publish(const workload::ThroughputReport& report);
  [[nodiscard]] std::string describe() const;

  // From the environment: `get_env` reads POD_NAME, POD_NAMESPACE and KUBERNETES_SERVICE_HOST.
  // nullptr (and `why`) outside a pod: no POD_NAME, or neither `kubeconfig` nor a service
  // account. Throws base::InputError for a kubeconfig that cannot be read or a pod name that is
  // not one.
  static std::unique_ptr<ThroughputAnnotation> from_environment(
      const std::optional<std::string>& kubeconfig,
      const std::function<std::string(const char*)>& get_env, std::string& why);

 private:
  std::string ns_;
  std::string pod_;
  std::string path_;
  std::unique_ptr<ApiClient> api_;
};

}  // namespace gpuorch::k8s

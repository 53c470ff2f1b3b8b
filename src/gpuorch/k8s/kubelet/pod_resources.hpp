#pragma once
// A client of the kubelet's pod-resources API v1 (PodResourcesLister.List over the unix socket
// /var/lib/kubelet/pod-resources/kubelet.sock): which container holds which device. `gpuorch
// exporter --kubernetes` labels a GPU's series with the pod, namespace and container holding it,
// as dcgm-exporter does.
#include <chrono>
#include <memory>
#include <string>

#include "gpuorch/telemetry/pods.hpp"

namespace grpc {
class Channel;
}

namespace gpuorch::k8s {

constexpr const char* kPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";

class PodResourcesClient {
 public:
  explicit PodResourcesClient(std::string socket_path,
                              std::chrono::milliseconds timeout = std::chrono::seconds(2));
  // Every device ID (replica suffix "::n" removed) any container holds, and who holds it.
  // False and `why` when the kubelet does not answer within the timeout.
  bool list(telemetry::PodAssignments& out, std::string& why) const;
  [[nodiscard]] const std::string& socket_path() const { return path_; }

 private:
  std::string path_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace gpuorch::k8s

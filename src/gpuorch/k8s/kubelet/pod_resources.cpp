#include "gpuorch/k8s/kubelet/pod_resources.hpp"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "podresources/v1/api.grpc.pb.h"

namespace gpuorch::k8s {

PodResourcesClient::PodResourcesClient(std::string socket_path, std::chrono::milliseconds timeout)
    : path_(std::move(socket_path)),
      timeout_(timeout),
      channel_(grpc::CreateChannel("unix:" + path_, grpc::InsecureChannelCredentials())) {}

bool PodResourcesClient::list(telemetry::PodAssignments& out, std::string& why) const {
  auto stub = v1::PodResourcesLister::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
  v1::ListPodResourcesRequest req;
  v1::ListPodResourcesResponse resp;
  if (const grpc::Status s = stub->List(&ctx, req, &resp); !s.ok()) {
    why = fmt::format("kubelet pod-resources at {}: {} ({})", path_, s.error_message(),
                      static_cast<int>(s.error_code()));
    return false;
  }
  out.clear();
  for (const auto& pod : resp.pod_resources()) {
    for (const auto& c : pod.containers()) {
      for (const auto& d : c.devices()) {
        for (const auto& id : d.device_ids()) {
          // Replicas of one GPU in one container are that one GPU, listed once.
          auto& holders = out[telemetry::physical_device_id(id)];
          const telemetry::PodRef ref{pod.name(), pod.namespace_(), c.name()};
          if (std::find(holders.begin(), holders.end(), ref) == holders.end())
            holders.push_back(ref);
        }
      }
    }
  }
  return true;
}

}  // namespace gpuorch::k8s

// The exporter's kubelet client (k8s/kubelet/pod_resources.hpp) against a test double of the
// kubelet's side: a real gRPC server implementing v1.PodResourcesLister/List on a temporary unix
// socket.
#include "gpuorch/k8s/kubelet/pod_resources.hpp"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "podresources/v1/api.grpc.pb.h"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

class FakePodResources final : public v1::PodResourcesLister::Service {
 public:
  v1::ListPodResourcesResponse answer;
  int calls = 0;
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    ++calls;
    *out = answer;
    return grpc::Status::OK;
  }
};

void add_container(v1::ListPodResourcesResponse& r, const std::string& pod, const std::string& ns,
                   const std::string& container, const std::string& resource,
                   std::initializer_list<std::string> ids) {
  v1::PodResources* p = nullptr;
  for (auto& existing : *r.mutable_pod_resources()) {
    if (existing.name() == pod && existing.namespace_() == ns) p = &existing;
  }
  if (p == nullptr) {
    p = r.add_pod_resources();
    p->set_name(pod);
    p->set_namespace_(ns);
  }
  auto* c = p->add_containers();
  c->set_name(container);
  auto* d = c->add_devices();
  d->set_resource_name(resource);
  for (const auto& id : ids) d->add_device_ids(id);
  d->mutable_topology()->add_nodes()->set_id(0);
}

TEST(PodResources, ListMapsDevicesToContainers) {
  test::TempDir dir;
  const std::string sock = dir.file("kubelet.sock");
  FakePodResources kubelet;
  add_container(kubelet.answer, "train-0", "ml", "worker", "nvidia.com/gpu",
                {"GPU-aaa", "GPU-bbb"});
  // Two replicas of one GPU in one container, and one replica of it in another pod.
  add_container(kubelet.answer, "share-1", "ml", "main", "nvidia.com/gpu.shared",
                {"GPU-ccc::0", "GPU-ccc::3"});
  add_container(kubelet.answer, "share-2", "dev", "main", "nvidia.com/gpu.shared", {"GPU-ccc::1"});
  add_container(kubelet.answer, "mig-0", "team", "app", "nvidia.com/mig-3g.40gb", {"MIG-ddd"});
  add_container(kubelet.answer, "cpu-only", "ml", "side", "example.com/fpga", {"fpga0"});
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + sock, grpc::InsecureServerCredentials());
  b.RegisterService(&kubelet);
  auto server = b.BuildAndStart();
  ASSERT_TRUE(server);

  PodResourcesClient client(sock);
  telemetry::PodAssignments pods;
  std::string why;
  ASSERT_TRUE(client.list(pods, why)) << why;
  EXPECT_EQ(kubelet.calls, 1);
  ASSERT_EQ(pods.at("GPU-aaa").size(), 1u);
  EXPECT_EQ(pods.at("GPU-aaa")[0], (telemetry::PodRef{"train-0", "ml", "worker"}));
  EXPECT_EQ(pods.at("GPU-bbb")[0].pod, "train-0");
  ASSERT_EQ(pods.at("GPU-ccc").size(), 2u);  // replicas merged per container
  EXPECT_EQ(pods.at("GPU-ccc")[0], (telemetry::PodRef{"share-1", "ml", "main"}));
  EXPECT_EQ(pods.at("GPU-ccc")[1], (telemetry::PodRef{"share-2", "dev", "main"}));
  EXPECT_EQ(pods.at("MIG-ddd")[0].container, "app");
  EXPECT_EQ(pods.count("GPU-ccc::0"), 0u);
  server->Shutdown();
}

TEST(PodResources, AnAbsentKubeletIsOneReason) {
  test::TempDir dir;
  PodResourcesClient client(dir.file("kubelet.sock"), std::chrono::milliseconds(300));
  telemetry::PodAssignments pods{{"stale", {}}};
  std::string why;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(client.list(pods, why));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_NE(why.find("kubelet pod-resources at " + dir.file("kubelet.sock")), std::string::npos)
      << why;
  EXPECT_EQ(why.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace gpuorch::k8s

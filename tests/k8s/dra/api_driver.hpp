#pragma once
// What the API server tests of the DRA driver share: a ResourceClaim for GPUs of the driver's
// class under one matchAttribute constraint, and the driver itself (the claim preparer reading
// claims from the real API server, its sockets in a temporary folder, and the kubelet's call to
// prepare one claim).
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/dra/dra_api.hpp"
#include "gpuorch/k8s/dra/driver_server.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s::dra {

// `count` devices of class gpu.gpuorch.io, all with one value of `match_attribute`.
inline nlohmann::json gpu_claim(const std::string& ns, const std::string& name, int count,
                                const std::string& match_attribute) {
  using nlohmann::json;
  const json request = {
      {"name", "gpus"},
      {"exactly",
       {{"deviceClassName", kDriverName}, {"allocationMode", "ExactCount"}, {"count", count}}}};
  const json constraint = {{"requests", json::array({"gpus"})},
                           {"matchAttribute", match_attribute}};
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"devices",
             {{"requests", json::array({request})}, {"constraints", json::array({constraint})}}}}}};
}

class ApiDriver {
 public:
  ApiDriver(ApiClient& api, const topology::Host& host, const std::string& node) {
    for (const char* d : {"registry", "plugin", "cdi"}) {
      std::filesystem::create_directories(dir_.path() / d);
    }
    PreparerOptions po;
    po.cdi = {kDriverName, dir_.file("cdi"), dir_.file("dev")};
    po.pool = node;
    po.checkpoint_path = dir_.file("plugin/checkpoint.json");
    preparer_ = std::make_unique<ClaimPreparer>(
        host, po, [&api](const std::string& ns, const std::string& name) {
          return api.get(namespaced_path(kResourceApi, ns, "resourceclaims", name));
        });
    server_ = std::make_unique<DriverServer>(
        *preparer_,
        DriverServerOptions{kDriverName, dir_.file("registry"), dir_.file("plugin"), 128, {}});
    stub_ = drapb::DRAPlugin::NewStub(
        grpc::CreateChannel("unix:" + server_->dra_socket(), grpc::InsecureChannelCredentials()));
  }

  // NodePrepareResources for one claim, as the kubelet calls it; the claim's answer (a failed
  // call is an answer with its error).
  drapb::NodePrepareResourceResponse prepare(const std::string& ns, const std::string& name,
                                             const std::string& uid) {
    drapb::NodePrepareResourcesRequest req;
    auto* c = req.add_claims();
    c->set_namespace_(ns);
    c->set_name(name);
    c->set_uid(uid);
    drapb::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const grpc::Status s = stub_->NodePrepareResources(&ctx, req, &resp);
    drapb::NodePrepareResourceResponse answer;
    if (!s.ok()) {
      answer.set_error("the call failed: " + s.error_message());
    } else if (resp.claims().count(uid) == 0) {
      answer.set_error("no answer for the claim");
    } else {
      answer = resp.claims().at(uid);
    }
    return answer;
  }

  // The claim's CDI spec file.
  [[nodiscard]] std::string cdi_spec(const std::string& uid) const {
    return dir_.file("cdi/gpu.gpuorch.io-claim_" + uid + ".json");
  }

 private:
  test::TempDir dir_;
  std::unique_ptr<ClaimPreparer> preparer_;
  std::unique_ptr<DriverServer> server_;
  std::unique_ptr<drapb::DRAPlugin::Stub> stub_;
};

}  // namespace gpuorch::k8s::dra

#pragma once
// The CRDs `gpuorch manifests` ships (the PodGroup's, scheduling.x-k8s.io/v1alpha1, and the
// Queue's, scheduling.run.ai/v2), installed on the test control plane once, with `served_path`
// served before the caller goes on.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"

namespace gpuorch::test {

inline void install_podgroup_crd(k8s::ApiClient& api, const std::string& served_path) {
  for (const auto& m : k8s::make_manifests({})) {
    if (m.object.value("kind", "") != "CustomResourceDefinition") continue;
    try {
      api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                 nlohmann::json::parse(m.object.dump()));
    } catch (const k8s::ApiError& e) {
      if (e.status() != 409) throw;  // installed by an earlier test of this process
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      api.get(served_path);
      return;
    } catch (const std::exception&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  ADD_FAILURE() << served_path << " never served";
}

}  // namespace gpuorch::test

#pragma once
// Reading back what a scheduler wrote on the real API server, for the e2e tests: the
// PodScheduled=False message, and polling an object until a condition holds.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"

namespace gpuorch::test {

// The message of the pod's PodScheduled=False condition; empty when it has none.
inline std::string unschedulable_message(const nlohmann::json& pod) {
  for (const auto& c : pod.value("/status/conditions"_json_pointer, nlohmann::json::array())) {
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False") {
      return c.value("message", "");
    }
  }
  return "";
}

inline std::string node_of(const nlohmann::json& pod) { return pod["spec"].value("nodeName", ""); }

// Polls the object at `path` until pred holds; returns the last object seen (a test failure is
// added when the time runs out).
inline nlohmann::json wait_for(k8s::ApiClient& api, const std::string& path,
                               const std::function<bool(const nlohmann::json&)>& pred,
                               std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  nlohmann::json o;
  while (std::chrono::steady_clock::now() < deadline) {
    o = api.get(path);
    if (pred(o)) return o;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << path << " never reached the expected state: " << o.dump();
  return o;
}

// The tests of one process share one control plane (ControlPlane::shared()); each test that
// schedules starts from no nodes and no pods in "default", whatever ran before it.
inline void clear_cluster(k8s::ApiClient& api) {
  auto drop = [&api](const std::string& path) {
    try {
      api.remove(path);
    } catch (const k8s::ApiError& e) {
      if (e.status() != 404) throw;  // an API that is not served has nothing to drop
    }
  };
  drop("/api/v1/namespaces/default/pods?gracePeriodSeconds=0");
  drop("/api/v1/nodes");
  drop("/api/v1/namespaces/default/events");
  drop("/apis/coordination.k8s.io/v1/namespaces/default/leases");
  drop("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline &&
         (!api.get("/api/v1/namespaces/default/pods")["items"].empty() ||
          !api.get("/api/v1/nodes")["items"].empty())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace gpuorch::test

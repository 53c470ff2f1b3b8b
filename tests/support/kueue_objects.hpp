#pragma once
// What the tests next to the real Kueue controller read off its objects: a condition of a
// Workload, ClusterQueue or AdmissionCheck, and the end of Kueue's log for failure messages.
#include <nlohmann/json.hpp>
#include <string>

#include "support/control_plane.hpp"
#include "support/test_support.hpp"

namespace gpuorch::test {

inline const std::string kKueueApi = "/apis/kueue.x-k8s.io/v1beta2";

// Whether `obj` has the condition `type` with status True.
inline bool has_condition(const nlohmann::json& obj, const std::string& type) {
  for (const auto& c : obj.value("/status/conditions"_json_pointer, nlohmann::json::array())) {
    if (c.value("type", "") == type && c.value("status", "") == "True") return true;
  }
  return false;
}

// The end of Kueue's log (DIR/logs/kueue.log).
inline std::string kueue_log(const ControlPlane& cp, std::size_t bytes = 6000) {
  const std::string text = read_text(cp.dir() + "/logs/kueue.log");
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

}  // namespace gpuorch::test

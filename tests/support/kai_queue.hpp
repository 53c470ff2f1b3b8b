#pragma once
// A KAI-Scheduler Queue object (scheduling.run.ai/v2) with a GPU quota and limit, as the tests of
// `gpuorch scheduler --queues` and `doctor queue` make them.
#include <nlohmann/json.hpp>
#include <string>

namespace gpuorch::test {

// `limit` -1: none (KAI's convention); `parent` empty: a top-level queue.
inline nlohmann::json kai_queue(const std::string& name, int quota, int limit,
                                const std::string& parent = "") {
  nlohmann::json q = {
      {"apiVersion", "scheduling.run.ai/v2"},
      {"kind", "Queue"},
      {"metadata", {{"name", name}}},
      {"spec",
       {{"resources", {{"gpu", {{"quota", quota}, {"limit", limit}, {"overQuotaWeight", 1}}}}}}}};
  if (!parent.empty()) q["spec"]["parentQueue"] = parent;
  return q;
}

}  // namespace gpuorch::test

#pragma once
// What the real-node tests read from a recorded host (tests/fixtures/topo/HOST/expected/topo.json,
// `gpuorch topo --json` of that machine).
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuorch::test {

// GPU index -> UUID of the recorded host.
inline std::vector<std::string> recorded_uuids(const std::string& topo_json) {
  std::ifstream in(topo_json);
  const nlohmann::json topo = nlohmann::json::parse(in);
  std::vector<std::string> uuids;
  for (const auto& g : topo["gpus"]) {
    const auto index = g.value("index", -1);
    if (index >= static_cast<int>(uuids.size())) uuids.resize(index + 1);
    uuids.at(index) = g.value("uuid", "");
  }
  return uuids;
}

}  // namespace gpuorch::test

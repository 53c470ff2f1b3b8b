#pragma once
// `gpuorch topo --json`: the full Host with a versioned schema (docs/topology.md).
#include <nlohmann/json.hpp>

#include "gpuorch/topology/host.hpp"

namespace gpuorch::topology {

inline constexpr const char* kTopologySchema = "gpuorch.topology/v1";

nlohmann::ordered_json to_json(const Host& host);
// Indented text; bytes that are not UTF-8 (a garbled sysfs file) become U+FFFD instead of failing.
std::string to_json_text(const nlohmann::ordered_json& j);

}  // namespace gpuorch::topology

#include "gpuorch/k8s/mirror/topology_annotation.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "gpuorch/k8s/api/server_json.hpp"
#include "gpuorch/topology/labels.hpp"

namespace gpuorch::k8s {

std::string topology_annotation(const topology::Host& h,
                                const std::vector<std::vector<int>>& islands) {
  nlohmann::ordered_json j;
  j["gpus"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < h.gpus.size(); ++i) {
    int island = 0;
    for (std::size_t k = 0; k < islands.size(); ++k) {
      if (std::find(islands[k].begin(), islands[k].end(), static_cast<int>(i)) !=
          islands[k].end()) {
        island = static_cast<int>(k);
      }
    }
    j["gpus"].push_back({{"index", h.gpus[i].index},
                         {"uuid", h.gpus[i].uuid},
                         {"numa_node", h.gpus[i].numa_node},
                         {"island", island}});
  }
  j["nvlink_islands"] = islands;
  // Exactly what a node spec of this host holds (empty when no pair's link is known), so the
  // scheduler on Kubernetes and `gpuorch topo --node-spec` see one matrix.
  const auto links = topology::node_spec(h).gpu_links;
  const std::size_t n = h.gpus.size();
  if (links.size() == n * n && n > 0) {
    auto& rows = j["links"] = nlohmann::ordered_json::array();
    for (std::size_t a = 0; a < n; ++a) {
      rows.push_back(std::vector<int>(links.begin() + static_cast<std::ptrdiff_t>(a * n),
                                      links.begin() + static_cast<std::ptrdiff_t>((a + 1) * n)));
    }
  }
  return j.dump();
}

std::vector<std::uint8_t> annotated_gpu_links(std::string_view annotation, int gpu_count) {
  // Node objects arrive with every kubelet status report: an annotation without a matrix (a node
  // with one GPU, an older labeller's) is not parsed at all.
  if (gpu_count < 2 || annotation.find("\"links\"") == std::string_view::npos) return {};
  nlohmann::json j;
  try {
    j = parse_server_json(annotation, kTopologyAnnotation);
  } catch (const std::runtime_error&) {
    return {};
  }
  const auto rows = j.is_object() ? j.find("links") : j.end();
  const auto n = static_cast<std::size_t>(gpu_count);
  if (rows == j.end() || !rows->is_array() || rows->size() != n) return {};
  for (const auto& row : *rows) {
    if (!row.is_array() || row.size() != n) return {};
  }
  std::vector<std::uint8_t> m(n * n, 0);
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      const auto& v = (*rows)[a][b];
      // Non-negative integers parse as unsigned; a negative, fractional or larger one is not a
      // score.
      if (!v.is_number_unsigned() || v.get<std::uint64_t>() > 255) return {};
      m[a * n + b] = static_cast<std::uint8_t>(v.get<std::uint64_t>());
      if (b < a && m[a * n + b] != m[b * n + a]) return {};
    }
  }
  return m;
}

}  // namespace gpuorch::k8s

#pragma once
// gpuorch's own cluster inventory (YAML): node templates times a count, so users can describe
// their cluster without a trace. Format: docs/inputs.md.
#include <cstdint>
#include <string>
#include <vector>

#include "gpuorch/cluster/node_spec.hpp"

namespace gpuorch::io {

// What an inventory may expand into. A few lines of YAML name any count, so the totals are
// checked over all templates before one node is made: past a limit the file is refused with
// "file:line: ..." (the template that crosses it) instead of running out of memory. `bytes` is an
// estimate of the expanded nodes' size (each node, its labels and its GPU link matrix).
struct InventoryLimits {
  std::int64_t nodes = 100'000;
  std::int64_t gpus = 1'000'000;
  std::int64_t bytes = std::int64_t{1} << 30;
};

std::vector<cluster::NodeSpec> load_inventory(const std::string& path,
                                              const InventoryLimits& limits = {});
std::vector<cluster::NodeSpec> parse_inventory(const std::string& text, const std::string& path,
                                               const InventoryLimits& limits = {});

}  // namespace gpuorch::io

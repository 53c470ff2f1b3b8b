#include "gpuorch/io/inventory.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <set>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/printable.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/yaml_reader.hpp"

namespace gpuorch::io {
namespace {

using base::YamlReader;

std::size_t line_of(const YAML::Node& node) { return YamlReader::line_of(node); }

std::int64_t nonnegative(const YamlReader& yaml, const YAML::Node& map, const char* key,
                         bool required, std::int64_t fallback = 0) {
  const YAML::Node v = map[key];
  if (!v) {
    if (required) yaml.fail(map, fmt::format("missing key '{}'", key));
    return fallback;
  }
  const std::int64_t out = yaml.integer(v, fmt::format("'{}'", key));
  if (out < 0) yaml.fail(v, fmt::format("'{}' is negative", key));
  return out;
}

std::string text(const YamlReader& yaml, const YAML::Node& map, const char* key, bool required) {
  const YAML::Node v = map[key];
  if (!v) {
    if (required) yaml.fail(map, fmt::format("missing key '{}'", key));
    return {};
  }
  return yaml.scalar(v, fmt::format("'{}'", key));
}

// The GPU link matrix (cluster::NodeSpec::gpu_links) from `links` (the matrix itself) or
// `nvlink_islands` (lists of GPUs joined by NVLink: 100 inside an island, 10 between); empty
// when the template has neither.
std::vector<std::uint8_t> gpu_links(const YamlReader& yaml, const YAML::Node& gpu, int count) {
  const YAML::Node links = gpu["links"];
  const YAML::Node islands = gpu["nvlink_islands"];
  if (!links && !islands) return {};
  if (links && islands) {
    yaml.fail(islands, "give 'links' or 'nvlink_islands', not both");
  }
  const char* key = links ? "links" : "nvlink_islands";
  if (count < 2) {
    yaml.fail(links ? links : islands, fmt::format("'{}' needs a 'count' of at least 2 GPUs", key));
  }
  const auto n = static_cast<std::size_t>(count);
  std::vector<std::uint8_t> m(n * n, 0);
  if (links) {
    if (!links.IsSequence() || links.size() != n) {
      yaml.fail(links, fmt::format("'links' must be a list of {} rows, one per GPU", n));
    }
    for (std::size_t a = 0; a < n; ++a) {
      const YAML::Node row = links[a];
      if (!row.IsSequence() || row.size() != n) {
        yaml.fail(row, fmt::format("row {} of 'links' must be a list of {} integers", a, n));
      }
      for (std::size_t b = 0; b < n; ++b) {
        const std::int64_t v =
            yaml.integer(row[b], fmt::format("'links' row {} column {}", a, b), 0, 255);
        if (a == b && v != 0) {
          yaml.fail(row[b], fmt::format("'links' row {} column {}: the diagonal must be 0", a, b));
        }
        if (b < a && v != m[b * n + a]) {
          yaml.fail(row[b], fmt::format("'links' is not symmetric: row {} column {} is {}, row {} "
                                        "column {} is {}",
                                        a, b, v, b, a, m[b * n + a]));
        }
        m[a * n + b] = static_cast<std::uint8_t>(v);
      }
    }
    return m;
  }
  if (!islands.IsSequence() || islands.size() == 0) {
    yaml.fail(islands, "'nvlink_islands' must be a non-empty list of lists of GPU indices");
  }
  std::vector<int> island_of(n, -1);
  int i = 0;
  for (const auto& island : islands) {
    if (!island.IsSequence() || island.size() == 0) {
      yaml.fail(island, "an NVLink island must be a non-empty list of GPU indices");
    }
    for (const auto& g : island) {
      const auto idx = static_cast<std::size_t>(
          yaml.integer(g, "a GPU index in 'nvlink_islands'", 0, static_cast<std::int64_t>(n) - 1));
      if (island_of[idx] >= 0) {
        yaml.fail(g, fmt::format("GPU {} is in 'nvlink_islands' twice", idx));
      }
      island_of[idx] = i;
    }
    ++i;
  }
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      m[a * n + b] = island_of[a] >= 0 && island_of[a] == island_of[b] ? 100 : 10;
    }
  }
  return m;
}

// What the templates read so far expand into, checked against the limits before anything is
// expanded. Counts are at most INT64_MAX each; the sums stop at the first one over a limit, so
// they cannot overflow.
struct Totals {
  std::int64_t nodes = 0;
  std::int64_t gpus = 0;
  std::int64_t bytes = 0;

  void add(const YamlReader& yaml, std::size_t line, std::int64_t count,
           const cluster::NodeSpec& spec, const InventoryLimits& limits) {
    std::int64_t per_node =
        static_cast<std::int64_t>(sizeof(cluster::NodeSpec)) + 32 +
        static_cast<std::int64_t>(spec.gpu_links.size() + spec.gpu_model.size());
    for (const auto& [k, v] : spec.labels) {
      per_node += static_cast<std::int64_t>(2 * sizeof(std::string) + k.size() + v.size());
    }
    if (count > limits.nodes - nodes) {
      base::fail_input(
          yaml.file(), line,
          fmt::format("the inventory expands past {} nodes (the limit)", limits.nodes));
    }
    nodes += count;
    if (spec.gpu_count > 0 && count > (limits.gpus - gpus) / spec.gpu_count) {
      base::fail_input(yaml.file(), line,
                       fmt::format("the inventory expands past {} GPUs (the limit)", limits.gpus));
    }
    gpus += count * spec.gpu_count;
    if (count > 0 && per_node > (limits.bytes - bytes) / count) {
      base::fail_input(yaml.file(), line,
                       fmt::format("the inventory expands past {} MiB of nodes (the limit)",
                                   limits.bytes >> 20));
    }
    bytes += count * per_node;
  }
};

}  // namespace

std::vector<cluster::NodeSpec> parse_inventory(const std::string& source, const std::string& path,
                                               const InventoryLimits& limits) {
  const YamlReader yaml(path);
  const YAML::Node root = yaml.load(source);
  if (!root || root.IsNull()) base::fail_input(path, 0, "empty inventory");
  yaml.only_keys(root, "the inventory", {"nodes"});
  const YAML::Node templates = root["nodes"];
  if (!templates || !templates.IsSequence() || templates.size() == 0) {
    base::fail_input(path, line_of(root), "'nodes' must be a non-empty list of node templates");
  }
  struct Template {
    std::string name;
    std::int64_t count = 0;
    cluster::NodeSpec spec;
  };
  std::vector<Template> read;
  Totals totals;
  std::set<std::string> names;
  for (const auto& t : templates) {
    yaml.only_keys(t, "a node template",
                   {"name", "count", "cpu_milli", "memory_mib", "gpu", "labels"});
    const std::string name = text(yaml, t, "name", true);
    if (name.empty()) base::fail_input(path, line_of(t), "'name' is empty");
    if (!names.insert(name).second) {
      base::fail_input(path, line_of(t),
                       fmt::format("duplicate template name '{}'", base::printable(name)));
    }
    const std::int64_t count = nonnegative(yaml, t, "count", false, 1);
    cluster::NodeSpec spec;
    spec.cpu_milli = nonnegative(yaml, t, "cpu_milli", true);
    spec.memory_mib = nonnegative(yaml, t, "memory_mib", true);
    if (const YAML::Node gpu = t["gpu"]) {
      yaml.only_keys(gpu, "'gpu'", {"model", "count", "memory_mib", "links", "nvlink_islands"});
      spec.gpu_model = text(yaml, gpu, "model", true);
      const std::int64_t gpus = nonnegative(yaml, gpu, "count", true);
      if (gpus > 64) base::fail_input(path, line_of(gpu), "'count' above 64 GPUs per node");
      spec.gpu_count = static_cast<int>(gpus);
      spec.gpu_memory_mib = nonnegative(yaml, gpu, "memory_mib", false);
      if (spec.gpu_count > 0 && spec.gpu_model.empty()) {
        base::fail_input(path, line_of(gpu), "'model' is empty");
      }
      if (spec.gpu_count > 0) spec.labels.emplace_back("gpu-model", spec.gpu_model);
      spec.gpu_links = gpu_links(yaml, gpu, spec.gpu_count);
    }
    if (const YAML::Node labels = t["labels"]) {
      for (auto& label : yaml.string_map(labels, "'labels'"))
        spec.labels.push_back(std::move(label));
    }
    totals.add(yaml, line_of(t), count, spec, limits);
    read.push_back(Template{name, count, std::move(spec)});
  }
  if (totals.nodes == 0) base::fail_input(path, 0, "the inventory has no nodes (every count is 0)");
  std::vector<cluster::NodeSpec> nodes;
  nodes.reserve(static_cast<std::size_t>(totals.nodes));
  for (const auto& t : read) {
    for (std::int64_t i = 0; i < t.count; ++i) {
      cluster::NodeSpec node = t.spec;
      node.name = fmt::format("{}-{:04d}", t.name, i);
      nodes.push_back(std::move(node));
    }
  }
  return nodes;
}

std::vector<cluster::NodeSpec> load_inventory(const std::string& path,
                                              const InventoryLimits& limits) {
  return parse_inventory(base::read_input_file(path, "inventory", base::kConfigFileMaxBytes), path,
                         limits);
}

}  // namespace gpuorch::io

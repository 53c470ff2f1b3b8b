// gpuorch topo: the host's GPUs, NICs, CPUs and NUMA nodes and how they connect.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli/verbs.hpp"
#include "discovery_flags.hpp"
#include "gpuorch/discover/discover.hpp"
#include "gpuorch/topology/json.hpp"
#include "gpuorch/topology/labels.hpp"
#include "gpuorch/topology/matrix.hpp"

namespace gpuorch::cli {
namespace {

struct TopoFlags {
  DiscoveryFlags discover;
  bool json = false;
  bool labels = false;
  bool node_spec = false;
  std::string record;
  int record_samples = 3;
};

int run(TopoFlags f) {
  if (!f.record.empty()) {
    discover::Options o = f.discover.options;
    o.use_nvml = !f.discover.no_nvml;
    discover::record_host(o, f.record, f.record_samples);
    fmt::print("recorded to {} (replay with: gpuorch topo --sysfs-root {})\n", f.record, f.record);
    return 0;
  }
  const auto d = discover_with_warnings(f.discover);
  if (f.labels && f.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [k, v] : topology::node_labels(d.host)) j[k] = v;
    fmt::print("{}\n", topology::to_json_text(j));
  } else if (f.labels) {
    for (const auto& [k, v] : topology::node_labels(d.host)) fmt::print("{}={}\n", k, v);
  } else if (f.node_spec) {
    fmt::print("{}", topology::inventory_yaml(topology::node_spec(d.host)));
  } else if (f.json) {
    fmt::print("{}\n", topology::to_json_text(topology::to_json(d.host)));
  } else {
    fmt::print("{}", topology::render_matrix(d.host));
  }
  return 0;
}

}  // namespace

void add_topo(CLI::App& app, Action& action) {
  auto flags = std::make_shared<TopoFlags>();
  CLI::App* cmd = app.add_subcommand(
      "topo",
      "Describe this host: GPUs, RDMA NICs, CPUs and NUMA nodes, and the connection between every "
      "pair of devices (the `nvidia-smi topo -m` matrix). See docs/topology.md.");
  cmd->add_flag("--json", flags->json, "Print the full model as JSON (schema in docs/topology.md)");
  cmd->add_flag(
      "--labels", flags->labels,
      "Print the Kubernetes node labels (gpu-feature-discovery / AMD node labeller names)");
  cmd->add_flag("--node-spec", flags->node_spec,
                "Print the node as a gpuorch YAML inventory (the scheduler's cluster::NodeSpec)");
  add_discovery_flags(cmd, flags->discover,
                      "Read a recorded tree (from --record) instead of the live host");
  cmd->add_option("--record", flags->record,
                  "Record what discovery reads on this host into a new folder, for --sysfs-root");
  cmd->add_option("--record-samples", flags->record_samples,
                  "NVML telemetry readings per GPU kept in the recording")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  cmd->callback([flags, &action] { action = [flags] { return run(*flags); }; });
}

}  // namespace gpuorch::cli

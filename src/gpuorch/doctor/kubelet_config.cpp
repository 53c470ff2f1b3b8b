// The kubelet's resource managers as GPU pods need them: the Topology Manager aligns a pod's GPUs,
// CPUs (CPU Manager) and memory (Memory Manager) on one NUMA node only when its policy is
// restricted or single-numa-node and the CPU Manager is static (kubelet defaults: none, none,
// container scope, memory None; KubeletConfiguration v1beta1).
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/yaml_reader.hpp"
#include "gpuorch/doctor/numa.hpp"

namespace gpuorch::doctor {
namespace {

std::string field(const base::YamlReader& yaml, const YAML::Node& doc, const char* key,
                  const char* fallback) {
  const YAML::Node n = doc[key];
  return n ? yaml.scalar(n, key) : fallback;
}

}  // namespace

std::vector<Finding> check_kubelet_config(const std::string& path) {
  const base::YamlReader yaml(path);
  const YAML::Node doc =
      yaml.load(base::read_input_file(path, "kubelet config", base::kConfigFileMaxBytes));
  if (!doc.IsMap() || !doc["kind"] || doc["kind"].as<std::string>("") != "KubeletConfiguration") {
    base::fail_input(path, 1, "not a KubeletConfiguration (kind: KubeletConfiguration)");
  }
  const std::string cpu = field(yaml, doc, "cpuManagerPolicy", "none");
  const std::string topo = field(yaml, doc, "topologyManagerPolicy", "none");
  const std::string scope = field(yaml, doc, "topologyManagerScope", "container");
  const std::string memory = field(yaml, doc, "memoryManagerPolicy", "None");
  const std::string evidence = fmt::format(
      "{}: cpuManagerPolicy {}, topologyManagerPolicy {}, topologyManagerScope {}, "
      "memoryManagerPolicy {}",
      path, cpu, topo, scope, memory);
  std::vector<Finding> out;
  if (cpu != "static") {
    out.push_back({Severity::kWarning, "kubelet.cpu-manager",
                   "the CPU Manager is not static: a GPU pod's threads float over every core of "
                   "the node, across NUMA nodes",
                   evidence,
                   "cpuManagerPolicy: static (with reservedSystemCPUs), and GPU pods in the "
                   "Guaranteed class with whole CPUs"});
  }
  if (topo != "single-numa-node" && topo != "restricted") {
    out.push_back({Severity::kWarning, "kubelet.topology-manager",
                   fmt::format("the Topology Manager policy {} admits GPU pods whose GPUs and "
                               "CPUs sit on different NUMA nodes",
                               topo),
                   evidence,
                   "topologyManagerPolicy: single-numa-node (or restricted) so the kubelet aligns "
                   "GPUs, CPUs and memory"});
  }
  if ((topo == "single-numa-node" || topo == "restricted") && scope != "pod") {
    out.push_back({Severity::kInfo, "kubelet.topology-scope",
                   "alignment is per container: a pod's sidecars may land on another NUMA node",
                   evidence, ""});
  }
  if (memory != "Static") {
    out.push_back({Severity::kInfo, "kubelet.memory-manager",
                   "the Memory Manager does not pin pod memory to the pod's NUMA node (the "
                   "process's own policy decides; `gpuorch doctor numa` shows it)",
                   evidence, ""});
  }
  if (out.empty()) {
    out.push_back(
        {Severity::kInfo, "kubelet.policies", "GPU pods are aligned to NUMA nodes", evidence, ""});
  }
  return out;
}

}  // namespace gpuorch::doctor

#pragma once
// The devices ResourceSlices (resource.k8s.io/v1) publish, by node, as the scheduler core sees
// them: the whole GPUs of gpuorch's DRA driver (gpu.gpuorch.io, `gpuorch dra-driver`) become the
// node's GPUs in cluster::NodeSpec (model, memory, and a link matrix from the topology attributes
// nvlinkDomain, pcieRoot and numaNode on the scale of topology/link_scores.hpp), so the core's
// filters, policies and GPU picker work on them; every device keeps its attributes for the
// claims' selectors (cel_subset.hpp).
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuorch/cluster/node_spec.hpp"
#include "gpuorch/k8s/mirror/cel_subset.hpp"

namespace gpuorch::k8s {

inline constexpr const char* kGpuDraDriver = "gpu.gpuorch.io";

struct DraDevice {
  std::string pool;
  std::string name;
  SelectorDevice view;  // driver, qualified attributes, capacity: what selectors read
  // Its index among the node's GPUs in the core's model; -1: not a device of gpuorch's driver
  // that the core counts (a whole GPU, or a MIG instance after the whole GPUs).
  int gpu = -1;
};

// In the core's model a MIG instance (static MIG: the layout its GPU has) is one more GPU of the
// node, after the whole GPUs: a unit one claim takes whole. A GPU in MIG mode publishes only its
// instances, so a whole GPU and its instances are never both allocatable; a whole-GPU request's
// selectors (type == "gpu") never take an instance.
struct DraNode {
  std::vector<DraDevice> devices;  // every device of the node's slices, any driver
  int gpu_count = 0;               // devices with gpu >= 0, indices 0..gpu_count-1
  int whole_gpus = 0;              // of which whole GPUs: indices 0..whole_gpus-1
  std::string gpu_model;
  std::int64_t gpu_memory_mib = 0;
  std::vector<std::uint8_t> gpu_links;
};

class DraInventory {
 public:
  // A ResourceSlice added, changed or deleted; true when some node's devices changed. A slice
  // that is not node-local (allNodes, a nodeSelector) or is malformed is left out.
  bool update_slice(const nlohmann::json& slice, bool deleted);
  // The node's DRA GPUs become its GPUs when it publishes no GPU extended resource (a node with
  // both keeps the device plugin's count and offers no DRA GPU to claims: never counted twice).
  // True when it did. `mig_instances`: its MIG instances count as GPUs after the whole ones (a
  // claim may take one); without, only whole GPUs (what the simulator's workloads ask).
  bool apply(cluster::NodeSpec& node, bool mig_instances = true) const;
  // The node's devices; nullptr when it has none.
  [[nodiscard]] const DraNode* node(const std::string& name) const;
  [[nodiscard]] const std::map<std::string, DraNode>& nodes() const { return nodes_; }
  // Where a device of an allocation result is: its node and GPU index; nullopt when it is not
  // a known whole GPU or MIG instance of gpuorch's driver.
  [[nodiscard]] std::optional<std::pair<std::string, int>> gpu_of(const std::string& driver,
                                                                  const std::string& pool,
                                                                  const std::string& device) const;

 private:
  struct Slice {
    std::string node;
    std::string driver;
    std::string pool;
    std::int64_t generation = 0;
    std::vector<DraDevice> devices;
  };
  void rebuild(const std::string& node);

  std::map<std::string, Slice> slices_;  // by slice name
  std::map<std::string, DraNode> nodes_;
};

// One device of a slice as selectors see it (unqualified attribute names get the driver's
// domain); throws std::invalid_argument for a device that is not shaped as the API says.
DraDevice dra_device(const nlohmann::json& device, const std::string& driver,
                     const std::string& pool);

}  // namespace gpuorch::k8s

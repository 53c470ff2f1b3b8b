#pragma once
// Which devices of one node a pod's device requests get together, as kube-scheduler's structured
// allocator decides it (docs/dra.md, "Several claims, several requests"): every device at most
// once across all of the pod's claims, an ExactCount request exactly its count of the devices it
// allows, an All request every device it allows, and each claim's constraints on the requests they
// name (matchAttribute: one value of the attribute for all their devices; distinctAttribute:
// pairwise different values; a device without the attribute meets neither). The scheduler core
// sees the result as the sets of devices that meet all requests at once (one GPU group each), so
// its GPU picker chooses among valid unions by NVLink, PCIe and NUMA.
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gpuorch::k8s {

// One request (or the chosen subrequest) on one node.
struct RequestSlot {
  std::vector<int> eligible;  // the node's devices it allows, ascending
  bool all = false;           // allocationMode All: every eligible device
  int count = 0;              // ExactCount
};

struct SlotConstraint {
  std::vector<std::size_t> slots;  // the requests it names (all of the claim's when it names none)
  std::string attribute;           // qualified
  bool distinct = false;           // distinctAttribute, else matchAttribute
};

// A device's value of an attribute as a comparable key (its type included); nullopt when the
// device lacks it.
using AttributeOf = std::function<std::optional<std::string>(int device, const std::string&)>;

// Each of `devices` (all of them, no repeats) given to one slot so that every slot is met; the
// slot index per device in the order of `devices`, or nullopt when no assignment exists.
std::optional<std::vector<std::size_t>> assign_devices(std::span<const int> devices,
                                                       const std::vector<RequestSlot>& slots,
                                                       const std::vector<SlotConstraint>& limits,
                                                       const AttributeOf& attribute_of);

// Bounds on the search per node: a node with more candidate sets than this is searched only
// through the first ones (every set kept is valid; a better connected one may be missed).
inline constexpr long long kUnionsExamined = 20000;
inline constexpr std::size_t kUnionsKept = 256;

struct ValidUnions {
  std::vector<std::vector<int>> sets;  // ascending device indices, in lexicographic order
  bool truncated = false;              // the bounds cut the search short
};
// Every set of the node's devices that meets all the slots at once.
ValidUnions valid_unions(const std::vector<RequestSlot>& slots,
                         const std::vector<SlotConstraint>& limits,
                         const AttributeOf& attribute_of);

}  // namespace gpuorch::k8s

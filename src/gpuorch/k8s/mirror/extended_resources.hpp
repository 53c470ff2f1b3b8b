#pragma once
// GPUs asked as extended resources, per container, for KEP-5004's bridge (docs/dra.md, "The
// extended-resource bridge"): a DeviceClass may name an extended resource
// (spec.extendedResourceName, e.g. nvidia.com/gpu), and every class is one under the implicit name
// deviceclass.resource.kubernetes.io/<class>; a pod asking for it on a node whose GPUs are DRA
// devices gets them through a ResourceClaim the scheduler makes (annotated
// resource.kubernetes.io/extended-resource-claim, owned by the pod), named in the pod's
// status.extendedResourceClaimStatus with the request each container's resource maps to.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuorch::k8s {

inline constexpr const char* kImplicitClassPrefix = "deviceclass.resource.kubernetes.io/";
inline constexpr const char* kExtendedResourceClaimAnnotation =
    "resource.kubernetes.io/extended-resource-claim";

struct GpuResourceAsk {
  std::string container;
  std::string resource;  // nvidia.com/gpu, amd.com/gpu or deviceclass.resource.kubernetes.io/X
  int count = 0;
  std::string request;  // the special claim's request: container-<i>-request-<j>
  bool operator==(const GpuResourceAsk&) const = default;
};

// The pod's GPU resources, init containers then containers; a count that is not a
// whole number is left out (the request reader refuses the pod for it).
std::vector<GpuResourceAsk> gpu_resource_asks(const nlohmann::json& pod);

// status.extendedResourceClaimStatus.resourceClaimName, or "".
std::string extended_claim_name(const nlohmann::json& pod);

// The pod's status.extendedResourceClaimStatus for `claim`.
nlohmann::json extended_claim_status(const std::vector<GpuResourceAsk>& asks,
                                     const std::string& claim);

}  // namespace gpuorch::k8s

#pragma once
// What the kubelet names and what the API server allocated: the claim reference of a
// NodePrepareResources call is checked before it reaches a path or a file name (it comes from a
// peer on a socket), and a ResourceClaim's status.allocation is read for the devices this
// driver's pool on this node holds.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuorch::k8s::dra {

struct ClaimRef {
  std::string ns, uid, name;
};

// Empty when the reference can address a claim: namespace a DNS-1123 label, name a subdomain,
// UID 1-64 characters of [A-Za-z0-9-] (the API server's UIDs are UUIDs; the UID names the CDI
// spec file, so nothing that could leave the CDI folder); else why not, one line.
[[nodiscard]] std::string check_claim_ref(const ClaimRef& c);

// One device of the claim's allocation.
struct AllocatedDevice {
  std::string request;  // the claim's request (for a firstAvailable subrequest "req/sub")
  std::string pool;
  std::string device;
};

// The results of `claim` (a resource.k8s.io/v1 ResourceClaim) for `driver` on pool `pool`, in the
// allocation's order. Throws std::runtime_error with the reason when the claim is not the one
// asked for (UID), not allocated, or allocates nothing of this driver on this node.
[[nodiscard]] std::vector<AllocatedDevice> allocated_devices(const nlohmann::json& claim,
                                                             const ClaimRef& asked,
                                                             const std::string& driver,
                                                             const std::string& pool);

}  // namespace gpuorch::k8s::dra

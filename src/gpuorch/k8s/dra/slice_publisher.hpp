#pragma once
// Keeps the driver's ResourceSlice on the API server equal to the one built from the host:
// created when missing, replaced (pool generation + 1) when its devices differ, left alone when
// equal. Owned by the Node when the Node exists, so deleting the Node deletes the slice.
#include <nlohmann/json.hpp>
#include <string>

#include "gpuorch/k8s/api/api_client.hpp"

namespace gpuorch::k8s::dra {

enum class SliceChange { kCreated, kUpdated, kUnchanged };
const char* to_string(SliceChange c);

// `slice` as resource_slice() builds it. Throws ApiError when the server refuses (validation,
// RBAC) and std::runtime_error when it cannot be reached; a write that lost a race (409) is
// retried from a fresh read.
SliceChange publish_slice(ApiClient& api, nlohmann::json slice);

}  // namespace gpuorch::k8s::dra

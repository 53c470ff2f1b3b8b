#include "gpuorch/k8s/dra/slice_publisher.hpp"

#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/dra/resource_slice.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;

// What a consumer reads: a slice whose devices, driver and node are these needs no write.
bool same_content(const json& a, const json& b) {
  for (const char* key : {"driver", "nodeName", "devices"}) {
    if (a.value(key, json()) != b.value(key, json())) return false;
  }
  return true;
}

std::string slices_path() { return std::string(kResourceApi) + "/resourceslices"; }

}  // namespace

const char* to_string(SliceChange c) {
  switch (c) {
    case SliceChange::kCreated:
      return "created";
    case SliceChange::kUpdated:
      return "updated";
    case SliceChange::kUnchanged:
      return "unchanged";
  }
  return "?";
}

SliceChange publish_slice(ApiClient& api, json slice) {
  const std::string name = slice["metadata"]["name"].get<std::string>();
  require_dns1123_subdomain(name, "ResourceSlice name");
  const std::string node = slice["spec"]["nodeName"].get<std::string>();
  // The Node as owner: a slice outlives the driver (its devices stay allocatable while it
  // restarts) but not the node.
  try {
    const json n = api.get(node_path(node));
    slice["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                                         {"kind", "Node"},
                                                         {"name", node},
                                                         {"uid", n["metadata"]["uid"]},
                                                         {"controller", true}}});
  } catch (const ApiError& e) {
    if (e.status() != 404) throw;
  }
  const std::string path = slices_path() + "/" + percent_encode(name);
  for (int attempt = 0;; ++attempt) {
    json current;
    try {
      current = api.get(path);
    } catch (const ApiError& e) {
      if (e.status() != 404) throw;
      api.create(slices_path(), slice);
      return SliceChange::kCreated;
    }
    if (same_content(current["spec"], slice["spec"])) return SliceChange::kUnchanged;
    json next = slice;
    next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"];
    next["spec"]["pool"]["generation"] =
        current["spec"]["pool"].value("generation", std::int64_t{0}) + 1;
    try {
      api.replace(path, next);
      return SliceChange::kUpdated;
    } catch (const ApiError& e) {
      if (e.status() != 409 || attempt >= 4) throw;
    }
  }
}

}  // namespace gpuorch::k8s::dra

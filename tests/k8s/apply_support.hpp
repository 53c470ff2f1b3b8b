#pragma once
// What the tests that send gpuorch's manifests to a real API server share: the collection each
// object goes to (from the server's discovery) and a create that replaces what an earlier call
// left.
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "gpuorch/k8s/api/api_client.hpp"

namespace gpuorch::k8s::test_apply {

using nlohmann::json;

struct Resource {
  std::string collection;  // "/apis/apps/v1/namespaces/NS/daemonsets"
  bool namespaced = false;
};

// The collection a kind is created in, from the API server's discovery (so a kind gpuorch starts
// to write is covered without touching this test).
inline Resource resource_of(ApiClient& api, const json& obj) {
  const std::string api_version = obj.at("apiVersion");
  const std::string kind = obj.at("kind");
  const std::string base = api_version == "v1" ? "/api/v1" : "/apis/" + api_version;
  const json list = api.get(base);
  for (const auto& r : list.at("resources")) {
    const std::string name = r.at("name");
    if (r.value("kind", "") != kind || name.find('/') != std::string::npos) continue;
    Resource out;
    out.namespaced = r.value("namespaced", false);
    out.collection = out.namespaced ? base + "/namespaces/" +
                                          obj["metadata"].value("namespace", "default") + "/" + name
                                    : base + "/" + name;
    return out;
  }
  throw std::runtime_error("the API server serves no " + kind + " in " + api_version);
}

// Created for real; an object left by an earlier call (409) is replaced with this one.
inline json create_or_replace(ApiClient& api, const Resource& r, const json& obj) {
  try {
    return api.create(r.collection + "?fieldValidation=Strict", obj);
  } catch (const ApiError& e) {
    if (e.status() != 409) throw;
  }
  const std::string path = r.collection + "/" + obj["metadata"]["name"].get<std::string>();
  json current = api.get(path);
  json next = obj;
  next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"];
  return api.replace(path, next);
}

}  // namespace gpuorch::k8s::test_apply

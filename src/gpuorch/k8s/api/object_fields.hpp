#pragma once
// Reading a Kubernetes object's JSON without trusting its shape: a field of something that is
// not an object, or a field that is absent, is null; a string field that is not a string is "".
// What the API server sends is checked where it is used, never assumed.
#include <nlohmann/json.hpp>
#include <string>

namespace gpuorch::k8s {

inline const nlohmann::json& field(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNull;
  if (!j.is_object()) return kNull;
  const auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

inline std::string str(const nlohmann::json& j, const char* key) {
  const nlohmann::json& f = field(j, key);
  return f.is_string() ? f.get<std::string>() : std::string();
}

}  // namespace gpuorch::k8s

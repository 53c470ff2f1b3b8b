#include "gpuorch/k8s/dra/claim_allocation.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "gpuorch/base/printable.hpp"
#include "gpuorch/k8s/api/api_path.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;

std::string string_at(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

std::string check_claim_ref(const ClaimRef& c) {
  if (!is_dns1123_label(c.ns)) {
    return fmt::format("claim namespace {} is not a DNS-1123 label",
                       base::quoted_printable(c.ns, 80));
  }
  if (!is_dns1123_subdomain(c.name)) {
    return fmt::format("claim name {} is not a DNS-1123 subdomain",
                       base::quoted_printable(c.name, 80));
  }
  const bool uid_ok = !c.uid.empty() && c.uid.size() <= 64 &&
                      c.uid.find_first_not_of(
                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "0123456789-") == std::string::npos;
  if (!uid_ok) {
    return fmt::format("claim UID {} is not 1-64 letters, digits and '-'",
                       base::quoted_printable(c.uid, 80));
  }
  return {};
}

std::vector<AllocatedDevice> allocated_devices(const json& claim, const ClaimRef& asked,
                                               const std::string& driver, const std::string& pool) {
  const std::string who = fmt::format("ResourceClaim {}/{}", asked.ns, asked.name);
  const json& meta = claim.contains("metadata") ? claim["metadata"] : json::object();
  if (const auto uid = string_at(meta, "uid"); uid != asked.uid) {
    // The claim was deleted and made again under the same name: the kubelet's claim is gone.
    throw std::runtime_error(
        fmt::format("{} has UID {}, the kubelet asked for {}", who, uid, asked.uid));
  }
  const json* results = nullptr;
  if (const auto s = claim.find("status"); s != claim.end() && s->is_object()) {
    if (const auto a = s->find("allocation"); a != s->end() && a->is_object()) {
      if (const auto d = a->find("devices"); d != a->end() && d->is_object()) {
        if (const auto r = d->find("results"); r != d->end() && r->is_array()) results = &*r;
      }
    }
  }
  if (results == nullptr) throw std::runtime_error(who + " is not allocated");
  std::vector<AllocatedDevice> out;
  for (const auto& r : *results) {
    if (!r.is_object() || string_at(r, "driver") != driver || string_at(r, "pool") != pool) {
      continue;
    }
    out.push_back({string_at(r, "request"), pool, string_at(r, "device")});
  }
  if (out.empty()) {
    throw std::runtime_error(
        fmt::format("{} allocates no device of driver {} in pool {}", who, driver, pool));
  }
  return out;
}

}  // namespace gpuorch::k8s::dra

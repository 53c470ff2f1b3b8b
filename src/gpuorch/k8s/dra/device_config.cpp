#include "gpuorch/k8s/dra/device_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "gpuorch/base/printable.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;

struct Entry {
  std::vector<std::string> requests;
  GpuConfig config;
};

bool applies(const Entry& e, const std::string& request) {
  if (e.requests.empty()) return true;
  const std::string main = request.substr(0, request.find('/'));
  return std::any_of(e.requests.begin(), e.requests.end(),
                     [&](const std::string& r) { return r == request || r == main; });
}

const json* configs_of(const json& claim) {
  const json* at = &claim;
  for (const char* key : {"status", "allocation", "devices", "config"}) {
    if (!at->is_object()) return nullptr;
    const auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

}  // namespace

std::vector<GpuConfig> device_configs(const json& claim,
                                      const std::vector<AllocatedDevice>& devices,
                                      const std::string& driver) {
  std::vector<Entry> from_class, from_claim;
  if (const json* configs = configs_of(claim); configs != nullptr) {
    if (!configs->is_array()) throw ConfigError("status.allocation.devices.config is not a list");
    for (std::size_t i = 0; i < configs->size(); ++i) {
      const json& c = (*configs)[i];
      const auto where = [&](const std::string& source) {
        return fmt::format("config[{}]{}", i, source.empty() ? "" : " (" + source + ")");
      };
      if (!c.is_object()) throw ConfigError(where("") + ": not an object");
      // A configuration of another kind than opaque has no driver to name it: a newer API's
      // business, not this driver's.
      const auto opaque = c.find("opaque");
      if (opaque == c.end() || !opaque->is_object()) continue;
      const auto d = opaque->find("driver");
      if (d == opaque->end() || *d != driver) continue;
      const auto source = c.find("source");
      const std::string src =
          source != c.end() && source->is_string() ? source->get<std::string>() : std::string();
      if (src != "FromClass" && src != "FromClaim") {
        throw ConfigError(fmt::format(
            "{}: source {} is not FromClass or FromClaim", where(""),
            source == c.end() ? "missing"
                              : base::quoted_printable(src.empty() ? source->dump() : src, 40)));
      }
      Entry e;
      if (const auto r = c.find("requests"); r != c.end()) {
        if (!r->is_array()) throw ConfigError(where(src) + ": requests is not a list");
        for (const auto& name : *r) {
          if (!name.is_string()) throw ConfigError(where(src) + ": a request name is not a string");
          e.requests.push_back(name.get<std::string>());
        }
      }
      try {
        e.config =
            parse_gpu_config(opaque->contains("parameters") ? (*opaque)["parameters"] : json());
      } catch (const ConfigError& err) {
        throw ConfigError(fmt::format("{}: {}", where(src), err.what()));
      }
      (src == "FromClass" ? from_class : from_claim).push_back(std::move(e));
    }
  }
  std::vector<GpuConfig> out;
  for (const auto& device : devices) {
    GpuConfig chosen;
    for (const auto* list : {&from_class, &from_claim}) {
      for (const auto& e : *list) {
        if (applies(e, device.request)) chosen = e.config;
      }
    }
    out.push_back(chosen);
  }
  return out;
}

}  // namespace gpuorch::k8s::dra

#include "gpuorch/k8s/mirror/pod_group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "gpuorch/k8s/api/object_fields.hpp"

namespace gpuorch::k8s {

namespace {

using nlohmann::json;

constexpr std::int64_t kMaxMembers = 100'000;

// A whole number in [lo, hi] at `value`, else `error` says which field holds what.
bool whole(const json& value, std::int64_t lo, std::int64_t hi, const char* field_name,
           std::int64_t& out, std::string& error) {
  if (!value.is_number_integer() || value.get<std::int64_t>() < lo ||
      value.get<std::int64_t>() > hi) {
    error = hi == INT64_MAX
                ? fmt::format("{} {} is not a whole number >= {}", field_name, value.dump(), lo)
                : fmt::format("{} {} is not a whole number in [{}, {}]", field_name, value.dump(),
                              lo, hi);
    return false;
  }
  out = value.get<std::int64_t>();
  return true;
}

}  // namespace

PodGroup podgroup_from_json(const json& obj) {
  PodGroup g;
  const json& meta = field(obj, "metadata");
  g.key = fmt::format("{}/{}", str(meta, "namespace"), str(meta, "name"));
  const json& spec = field(obj, "spec");
  const std::string version = str(obj, "apiVersion");
  g.upstream = version.empty() ? field(spec, "schedulingPolicy").is_object()
                               : version.starts_with("scheduling.k8s.io/");
  std::int64_t n = 0;
  if (g.upstream) {
    const json& policy = field(spec, "schedulingPolicy");
    if (field(policy, "gang").is_object()) {
      if (whole(field(field(policy, "gang"), "minCount"), 1, kMaxMembers,
                "spec.schedulingPolicy.gang.minCount", n, g.error)) {
        g.min_member = static_cast<int>(n);
      }
    } else if (field(policy, "basic").is_object()) {
      g.gang = false;
    } else {
      g.error = "spec.schedulingPolicy names neither gang nor basic";
    }
    return g;
  }
  // No spec at all is malformed; a spec without minMember is a gang of one (scheduler-plugins).
  const json min = !spec.is_object() ? json(nullptr) : spec.value("minMember", json(1));
  if (whole(min, 1, kMaxMembers, "spec.minMember", n, g.error)) g.min_member = static_cast<int>(n);
  if (spec.is_object() && spec.contains("scheduleTimeoutSeconds")) {
    std::string why;
    if (whole(spec["scheduleTimeoutSeconds"], 0, INT64_MAX, "spec.scheduleTimeoutSeconds", n,
              why)) {
      g.timeout_seconds = static_cast<int>(std::min<std::int64_t>(n, 1 << 30));
    } else if (g.error.empty()) {
      g.error = why;
    }
  }
  return g;
}

}  // namespace gpuorch::k8s

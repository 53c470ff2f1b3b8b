#include "gpuorch/k8s/dra/gpu_config.hpp"

#include <fmt/format.h>

#include <initializer_list>
#include <string_view>

#include "gpuorch/base/printable.hpp"
#include "gpuorch/k8s/api/quantity.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;

[[noreturn]] void fail(std::string_view field, const std::string& what) {
  throw ConfigError(fmt::format("GpuConfig {}: {}", field, what));
}

// A string as its text in quotes ('Often'), anything else as its JSON ([] or 101).
std::string shown(const json& j) {
  if (j.is_string()) return base::quoted_printable(j.get<std::string>(), 60);
  std::string text = j.dump(-1, ' ', true, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

void only_fields(const json& object, std::string_view where,
                 std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : object.items()) {
    bool ok = false;
    for (const auto k : known) ok = ok || key == k;
    if (!ok) {
      const std::string field = where.empty() ? key : fmt::format("{}.{}", where, key);
      fail(field, "unknown field (gpuorch reads NVIDIA's GpuConfig fields; is it misspelt?)");
    }
  }
}

const json& object_at(const json& parent, const char* key, std::string_view field) {
  const json& j = parent.at(key);
  if (!j.is_object()) fail(field, fmt::format("must be an object, not {}", shown(j)));
  return j;
}

// A memory quantity as NVIDIA's driver reads it: whole MiB, rounded down, at least 1.
std::int64_t pinned_mib(const json& j, std::string_view field) {
  std::optional<std::int64_t> mib;
  if (j.is_string()) {
    mib = quantity_mib(j.get<std::string>(), false);
  } else if (j.is_number_integer()) {
    mib = quantity_mib(std::to_string(j.get<std::int64_t>()), false);
  }
  if (!mib) fail(field, fmt::format("{} is not a memory quantity (\"10Gi\", \"512Mi\")", shown(j)));
  if (*mib < 1) fail(field, fmt::format("{} is below 1Mi, the smallest limit MPS takes", shown(j)));
  return *mib;
}

MpsConfig parse_mps(const json& j) {
  only_fields(j, "sharing.mpsConfig",
              {"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit",
               "defaultPerDevicePinnedMemoryLimit"});
  MpsConfig m;
  if (const auto it = j.find("defaultActiveThreadPercentage"); it != j.end()) {
    constexpr std::string_view field = "sharing.mpsConfig.defaultActiveThreadPercentage";
    if (!it->is_number_integer())
      fail(field, fmt::format("{} is not an integer (a JSON number)", shown(*it)));
    const auto p = it->get<std::int64_t>();
    if (p < 0 || p > 100) fail(field, fmt::format("{} is not between 0 and 100", p));
    m.default_active_thread_percentage = static_cast<int>(p);
  }
  if (const auto it = j.find("defaultPinnedDeviceMemoryLimit"); it != j.end()) {
    m.default_pinned_device_memory_mib =
        pinned_mib(*it, "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit");
  }
  if (j.contains("defaultPerDevicePinnedMemoryLimit")) {
    constexpr std::string_view where = "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit";
    const json& limits = object_at(j, "defaultPerDevicePinnedMemoryLimit", where);
    for (const auto& [key, value] : limits.items()) {
      const std::string field = fmt::format("{}[{}]", where, base::quoted_printable(key, 80));
      if (key.empty()) fail(field, "a device key is a UUID or a position (\"0\"), not empty");
      m.default_per_device_pinned_memory_mib[key] = pinned_mib(value, field);
    }
  }
  return m;
}

}  // namespace

const char* to_string(SharingStrategy s) {
  switch (s) {
    case SharingStrategy::kTimeSlicing:
      return "TimeSlicing";
    case SharingStrategy::kMps:
      return "MPS";
    case SharingStrategy::kNone:
      break;
  }
  return "none";
}

const char* to_string(TimeSliceInterval i) {
  switch (i) {
    case TimeSliceInterval::kShort:
      return "Short";
    case TimeSliceInterval::kMedium:
      return "Medium";
    case TimeSliceInterval::kLong:
      return "Long";
    case TimeSliceInterval::kDefault:
      break;
  }
  return "Default";
}

GpuConfig parse_gpu_config(const json& parameters) {
  if (!parameters.is_object()) {
    fail("parameters", fmt::format("must be an object, not {}", shown(parameters)));
  }
  only_fields(parameters, "", {"apiVersion", "kind", "sharing"});
  const auto api = parameters.find("apiVersion");
  if (api == parameters.end() || !api->is_string() ||
      (*api != kGpuConfigApiVersion && *api != kNvidiaGpuConfigApiVersion)) {
    fail("apiVersion", fmt::format("{} is not {} (or NVIDIA's {})",
                                   api == parameters.end() ? "missing" : shown(*api),
                                   kGpuConfigApiVersion, kNvidiaGpuConfigApiVersion));
  }
  const auto kind = parameters.find("kind");
  if (kind == parameters.end() || *kind != "GpuConfig") {
    fail("kind", fmt::format("{} is not GpuConfig, the only kind gpuorch's driver reads",
                             kind == parameters.end() ? "missing" : shown(*kind)));
  }
  GpuConfig c;
  if (!parameters.contains("sharing")) return c;  // NVIDIA's default: the GPU is not shared
  const json& sharing = object_at(parameters, "sharing", "sharing");
  only_fields(sharing, "sharing", {"strategy", "timeSlicingConfig", "mpsConfig"});
  const auto strategy = sharing.find("strategy");
  if (strategy == sharing.end()) fail("sharing.strategy", "missing (TimeSlicing or MPS)");
  if (*strategy == "TimeSlicing") {
    c.strategy = SharingStrategy::kTimeSlicing;
  } else if (*strategy == "MPS") {
    c.strategy = SharingStrategy::kMps;
  } else if (*strategy == "Fabric") {
    fail("sharing.strategy", "Fabric is not supported by gpuorch (nor enabled in NVIDIA's driver)");
  } else {
    fail("sharing.strategy", fmt::format("{} is not TimeSlicing or MPS", shown(*strategy)));
  }
  if (sharing.contains("timeSlicingConfig")) {
    if (c.strategy != SharingStrategy::kTimeSlicing) {
      fail("sharing.timeSlicingConfig", "is for strategy TimeSlicing, not MPS");
    }
    const json& ts = object_at(sharing, "timeSlicingConfig", "sharing.timeSlicingConfig");
    only_fields(ts, "sharing.timeSlicingConfig", {"interval"});
    if (const auto it = ts.find("interval"); it != ts.end()) {
      bool known = false;
      for (const auto i : {TimeSliceInterval::kDefault, TimeSliceInterval::kShort,
                           TimeSliceInterval::kMedium, TimeSliceInterval::kLong}) {
        if (*it == to_string(i)) {
          c.interval = i;
          known = true;
        }
      }
      if (!known) {
        fail("sharing.timeSlicingConfig.interval",
             fmt::format("{} is not Default, Short, Medium or Long", shown(*it)));
      }
    }
  }
  if (sharing.contains("mpsConfig")) {
    if (c.strategy != SharingStrategy::kMps) {
      fail("sharing.mpsConfig", "is for strategy MPS, not TimeSlicing");
    }
    c.mps = parse_mps(object_at(sharing, "mpsConfig", "sharing.mpsConfig"));
  }
  return c;
}

}  // namespace gpuorch::k8s::dra

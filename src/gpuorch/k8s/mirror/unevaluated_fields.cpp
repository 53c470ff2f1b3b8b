#include "gpuorch/k8s/mirror/unevaluated_fields.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

#include "gpuorch/k8s/api/object_fields.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

bool non_empty(const json& j) { return (j.is_array() || j.is_object()) && !j.empty(); }

// Volume sources whose placement kube-scheduler checks: claims bind to a PersistentVolume that
// may be pinned to nodes or zones, or wait for the scheduler's choice (WaitForFirstConsumer);
// attachable disks count against a node's attach limit and some may be mounted by one node only.
constexpr std::array<const char*, 9> kNodeBoundVolumes = {"persistentVolumeClaim",
                                                          "ephemeral",
                                                          "csi",
                                                          "gcePersistentDisk",
                                                          "awsElasticBlockStore",
                                                          "azureDisk",
                                                          "cinder",
                                                          "rbd",
                                                          "iscsi"};

bool accounted_resource(std::string_view name) {
  if (name == "cpu" || name == "memory" || name == kGpuMilliAnnotation) return true;
  // A DeviceClass by its implicit extended resource name: GPUs of KEP-5004's bridge.
  if (name.starts_with(kImplicitClassPrefix)) return true;
  return std::any_of(std::begin(kGpuResources), std::end(kGpuResources),
                     [&](const char* gpu) { return name == gpu; });
}

void check_affinity(const json& affinity, UnevaluatedFields& out) {
  for (const char* kind : {"podAffinity", "podAntiAffinity"}) {
    const json& a = field(affinity, kind);
    if (non_empty(field(a, "requiredDuringSchedulingIgnoredDuringExecution"))) {
      out.required.push_back(fmt::format(
          "spec.affinity.{}.requiredDuringSchedulingIgnoredDuringExecution (inter-pod {})", kind,
          kind[3] == 'A' ? "anti-affinity" : "affinity"));
    }
    if (non_empty(field(a, "preferredDuringSchedulingIgnoredDuringExecution"))) {
      out.preferred.push_back(
          fmt::format("spec.affinity.{}.preferredDuringSchedulingIgnoredDuringExecution", kind));
    }
  }
  if (non_empty(field(field(affinity, "nodeAffinity"),
                      "preferredDuringSchedulingIgnoredDuringExecution"))) {
    out.preferred.emplace_back(
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution");
  }
}

void check_spread(const json& constraints, UnevaluatedFields& out) {
  if (!constraints.is_array()) return;
  for (std::size_t i = 0; i < constraints.size(); ++i) {
    const json& when = field(constraints[i], "whenUnsatisfiable");
    const bool soft = when.is_string() && when.get<std::string>() == "ScheduleAnyway";
    const json& key = field(constraints[i], "topologyKey");
    const std::string what =
        fmt::format("spec.topologySpreadConstraints[{}] (topologyKey {}, whenUnsatisfiable {})", i,
                    key.is_string() ? key.get<std::string>() : "?",
                    when.is_string() ? when.get<std::string>() : "DoNotSchedule");
    (soft ? out.preferred : out.required).push_back(what);
  }
}

void check_containers(const json& spec, UnevaluatedFields& out) {
  for (const char* list : {"containers", "initContainers"}) {
    const json& containers = field(spec, list);
    if (!containers.is_array()) continue;
    for (std::size_t i = 0; i < containers.size(); ++i) {
      const json& c = containers[i];
      const json& ports = field(c, "ports");
      if (ports.is_array()) {
        for (std::size_t p = 0; p < ports.size(); ++p) {
          const json& host_port = field(ports[p], "hostPort");
          if (host_port.is_number_integer() && host_port.get<std::int64_t>() != 0) {
            out.required.push_back(fmt::format("spec.{}[{}].ports[{}].hostPort {} (host ports)",
                                               list, i, p, host_port.get<std::int64_t>()));
          }
        }
      }
      for (const char* part : {"requests", "limits"}) {
        const json& resources = field(field(c, "resources"), part);
        if (!resources.is_object()) continue;
        for (const auto& [name, value] : resources.items()) {
          if (accounted_resource(name)) continue;
          out.required.push_back(fmt::format(
              "spec.{}[{}].resources.{}[{}] (a resource gpuorch scheduler does not account)", list,
              i, part, name));
        }
      }
    }
  }
}

void check_volumes(const json& volumes, UnevaluatedFields& out) {
  if (!volumes.is_array()) return;
  for (std::size_t i = 0; i < volumes.size(); ++i) {
    for (const char* source : kNodeBoundVolumes) {
      if (field(volumes[i], source).is_null()) continue;
      const json& name = field(volumes[i], "name");
      out.required.push_back(
          fmt::format("spec.volumes[{}].{} (volume {}: volume binding and node limits)", i, source,
                      name.is_string() ? name.get<std::string>() : "?"));
    }
  }
}

}  // namespace

UnevaluatedFields unevaluated_fields(const json& pod) {
  UnevaluatedFields out;
  const json& spec = field(pod, "spec");
  check_affinity(field(spec, "affinity"), out);
  check_spread(field(spec, "topologySpreadConstraints"), out);
  check_containers(spec, out);
  check_volumes(field(spec, "volumes"), out);
  return out;
}

std::string unevaluated_message(const std::string& field) {
  return fmt::format(
      "Unsupported: {} constrains placement and gpuorch scheduler does not evaluate it, so it "
      "refuses the pod rather than ignore it; remove the field, or let kube-scheduler schedule "
      "the pod with gpuorch as its extender (`gpuorch extender`, docs/extender.md), which "
      "evaluates it",
      field);
}

}  // namespace gpuorch::k8s

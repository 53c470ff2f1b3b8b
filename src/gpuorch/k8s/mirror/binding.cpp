#include "gpuorch/k8s/mirror/binding.hpp"

#include <fmt/format.h>

#include "gpuorch/k8s/mirror/pod_object.hpp"

namespace gpuorch::k8s {

nlohmann::json gpu_binding(const std::string& ns, const std::string& name, const std::string& uid,
                           const std::string& node, const std::vector<int>& gpus,
                           std::int64_t share_milli) {
  nlohmann::json binding = {
      {"apiVersion", "v1"},
      {"kind", "Binding"},
      {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
      {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  if (!gpus.empty()) {
    nlohmann::json annotations = {{kGpusAnnotation, fmt::format("{}", fmt::join(gpus, ","))}};
    if (share_milli > 0) annotations[kGpuMilliAnnotation] = std::to_string(share_milli);
    binding["metadata"]["annotations"] = std::move(annotations);
  }
  return binding;
}

std::string prometheus_counter(const char* name, const char* help, std::uint64_t value) {
  return fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0} {2}\n", name, help, value);
}

}  // namespace gpuorch::k8s

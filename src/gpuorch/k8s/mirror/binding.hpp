#pragma once
// What `gpuorch scheduler` and `gpuorch extender` write when they bind: one pods/binding whose
// metadata carries the GPU choice (gpuorch.io/gpus, and gpuorch.io/gpu-milli for a share). The API
// server copies a Binding's annotations onto the pod in the same write that sets spec.nodeName, so
// nobody (the device plugin included) sees the pod bound without its GPUs.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuorch::k8s {

nlohmann::json gpu_binding(const std::string& ns, const std::string& name, const std::string& uid,
                           const std::string& node, const std::vector<int>& gpus,
                           std::int64_t share_milli);

// One Prometheus counter in the text format (HELP, TYPE, value).
std::string prometheus_counter(const char* name, const char* help, std::uint64_t value);

}  // namespace gpuorch::k8s

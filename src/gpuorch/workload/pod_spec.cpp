#include "gpuorch/workload/pod_spec.hpp"

namespace gpuorch::workload {

std::string join_models(const std::vector<std::string>& models) {
  std::string out;
  for (const auto& m : models) {
    if (!out.empty()) out.push_back('|');
    out += m;
  }
  return out;
}

}  // namespace gpuorch::workload

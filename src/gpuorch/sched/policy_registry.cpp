// The one table of policy names.
#include <fmt/format.h>

#include <array>

#include "gpuorch/base/error.hpp"
#include "gpuorch/sched/policies/policies.hpp"

namespace gpuorch::sched {
namespace {

struct Entry {
  std::string_view name;
  std::string_view study_label;
  std::unique_ptr<Policy> (*make)(const PolicyContext&);
  bool needs_fragmentation;
};

constexpr std::array kPolicies{
    Entry{"random", "01-Random", make_random_policy, false},
    Entry{"dot-product", "02-DotProd", make_dot_product_policy, false},
    Entry{"gpu-clustering", "03-GpuClustering", make_gpu_clustering_policy, false},
    Entry{"gpu-packing", "04-GpuPacking", make_gpu_packing_policy, false},
    Entry{"best-fit", "05-BestFit", make_best_fit_policy, false},
    Entry{"fgd", "06-FGD", make_fgd_policy, true},
};

}  // namespace

std::vector<std::string> policy_names() {
  std::vector<std::string> names;
  for (const auto& e : kPolicies) names.emplace_back(e.name);
  return names;
}

std::string_view study_label(std::string_view name) {
  for (const auto& e : kPolicies) {
    if (e.name == name) return e.study_label;
  }
  return {};
}

std::unique_ptr<Policy> make_policy(std::string_view name, const PolicyContext& context) {
  for (const auto& e : kPolicies) {
    if (e.name != name) continue;
    if (e.needs_fragmentation && context.fragmentation == nullptr) {
      base::fail_input(fmt::format("policy '{}' needs a target workload", name));
    }
    return e.make(context);
  }
  base::fail_input(
      fmt::format("unknown policy '{}' (known: {})", name, fmt::join(policy_names(), ", ")));
}

}  // namespace gpuorch::sched

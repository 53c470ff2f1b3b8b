#pragma once
// Factories of the built-in policies (one per file); policy_registry.cpp maps names to them.
#include <array>
#include <memory>

#include "gpuorch/base/units.hpp"
#include "gpuorch/sched/policy.hpp"

namespace gpuorch::sched {

// The study normalises resources by its largest node: 128 cores and 8 GPUs.
inline constexpr std::int64_t kMaxSpecCpuMilli = 128000;
inline constexpr std::int64_t kMaxSpecGpuMilli = 8000;

std::unique_ptr<Policy> make_random_policy(const PolicyContext& context);
std::unique_ptr<Policy> make_dot_product_policy(const PolicyContext& context);
std::unique_ptr<Policy> make_gpu_clustering_policy(const PolicyContext& context);
std::unique_ptr<Policy> make_gpu_packing_policy(const PolicyContext& context);
std::unique_ptr<Policy> make_best_fit_policy(const PolicyContext& context);
std::unique_ptr<Policy> make_fgd_policy(const PolicyContext& context);
std::unique_ptr<Policy> make_efd_policy(const PolicyContext& context);
inline constexpr std::array<std::string_view, 15> kEfdOptions{
    "popularity",       "score_scale",     "scarcity_weight",  "scarcity_history", "scarcity_cap",
    "scarcity_feed",    "cpu_competition", "multi_gpu_weight", "feed_limit",       "quantise",
    "scarcity_dynamic", "popularity_band", "multi_reserve",    "reserve_nested",   "feed_tail"};
std::unique_ptr<Policy> make_efd_online_policy(const PolicyContext& context);
std::unique_ptr<Policy> make_most_free_policy(const PolicyContext& context);
std::unique_ptr<Policy> make_tightest_fit_policy(const PolicyContext& context);

}  // namespace gpuorch::sched

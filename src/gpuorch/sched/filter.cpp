#include "gpuorch/sched/filter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "gpuorch/sched/framework/builtin_filters.hpp"

namespace gpuorch::sched {
namespace {

// The built-in resource filters, unrolled at compile time: each check is a direct (inlinable)
// call through the constant table, so the registry costs the hot path nothing over a hand-written
// chain. Which member (filter or filter_empty) is the template argument.
template <ResourceFilterFn FilterPlugin::*Check, std::size_t... I>
FilterId run_builtin(const cluster::Cluster& cluster, cluster::NodeIndex n, const PodRequest& pod,
                     std::index_sequence<I...>) {
  FilterId failed = kFits;
  const auto passes = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
    constexpr const FilterPlugin& f = *kBuiltinFilters[J];
    constexpr ResourceFilterFn check = f.*Check;
    if constexpr (f.stage != FilterStage::kResources) {
      return true;
    } else if (check(cluster, n, pod)) {
      return true;
    }
    failed = FilterId(static_cast<std::uint8_t>(J + 1));
    return false;
  };
  (passes(std::integral_constant<std::size_t, I>{}) && ...);
  return failed;
}

// Out of line and cold: inlined, its calls would make check_node save registers on every path.
template <ResourceFilterFn FilterPlugin::*Check>
[[gnu::noinline, gnu::cold]] FilterId run_registered(const cluster::Cluster& cluster,
                                                     cluster::NodeIndex n, const PodRequest& pod) {
  const auto& extra = detail::registered_filters;
  for (std::size_t i = 0; i < extra.size(); ++i) {
    const ResourceFilterFn check = extra[i].*Check;
    if (extra[i].stage == FilterStage::kResources && !check(cluster, n, pod)) {
      return FilterId(static_cast<std::uint8_t>(kBuiltinFilters.size() + 1 + i));
    }
  }
  return kFits;
}

template <ResourceFilterFn FilterPlugin::*Check>
FilterId run_filters(const cluster::Cluster& cluster, cluster::NodeIndex n, const PodRequest& pod) {
  // Labels, taints and cordons are the node's, not its load's: an empty node keeps them.
  if (!pod.node_reasons.empty() && pod.node_reasons[n] != kFits) return pod.node_reasons[n];
  const FilterId r =
      run_builtin<Check>(cluster, n, pod, std::make_index_sequence<kBuiltinFilters.size()>{});
  if (r != kFits || detail::registered_filters.empty()) [[likely]] {
    return r;
  }
  return run_registered<Check>(cluster, n, pod);
}

}  // namespace

FilterId check_node(const cluster::Cluster& cluster, cluster::NodeIndex n, const PodRequest& pod) {
  return run_filters<&FilterPlugin::filter>(cluster, n, pod);
}

FilterId check_empty_node(const cluster::Cluster& cluster, cluster::NodeIndex n,
                          const PodRequest& pod) {
  return run_filters<&FilterPlugin::filter_empty>(cluster, n, pod);
}

FilterId check_node_constraints(const cluster::NodeSpec& node,
                                const workload::NodeConstraints& pod) {
  for (std::size_t i = 1; i <= filter_count(); ++i) {
    const auto id = FilterId(static_cast<std::uint8_t>(i));
    const FilterPlugin& f = filter_plugin(id);
    if (f.stage == FilterStage::kNode && !f.filter_node(node, pod)) return id;
  }
  return kFits;
}

bool node_filters_registered() {
  return std::any_of(detail::registered_filters.begin(), detail::registered_filters.end(),
                     [](const FilterPlugin& f) { return f.stage == FilterStage::kNode; });
}

FilterId FilterDiagnosis::most_rejections() const {
  std::size_t best = 0;
  std::uint32_t most = 0;
  for (std::size_t i = 1; i <= filter_count(); ++i) {
    if (nodes_by_filter[i] > most) {
      most = nodes_by_filter[i];
      best = i;
    }
  }
  return FilterId(static_cast<std::uint8_t>(best));
}

std::string FilterDiagnosis::explain(const PodRequest& pod) const {
  std::vector<std::size_t> order(filter_count() + 1);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [this](std::size_t a, std::size_t b) {
    return nodes_by_filter[a] > nodes_by_filter[b];
  });
  std::vector<std::string> parts;
  for (const std::size_t i : order) {
    if (i == 0 || nodes_by_filter[i] == 0) continue;
    parts.push_back(fmt::format("{} {}", nodes_by_filter[i],
                                filter_phrase(FilterId(static_cast<std::uint8_t>(i)), pod)));
  }
  if (parts.empty()) return fmt::format("{} nodes", nodes_checked);
  return fmt::format("{} nodes: {}", nodes_checked, fmt::join(parts, ", "));
}

}  // namespace gpuorch::sched

#include "gpuorch/sched/framework/filter_registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <ostream>
#include <stdexcept>

#include "gpuorch/sched/framework/builtin_filters.hpp"

namespace gpuorch::sched {

std::size_t filter_count() { return kBuiltinFilters.size() + detail::registered_filters.size(); }

const FilterPlugin& filter_plugin(FilterId id) {
  assert(id != kFits && filter_index(id) <= filter_count());
  const std::size_t i = filter_index(id) - 1;
  if (i < kBuiltinFilters.size()) return *kBuiltinFilters[i];
  return detail::registered_filters[i - kBuiltinFilters.size()];
}

FilterId filter_id(std::string_view name) {
  for (std::size_t i = 1; i <= filter_count(); ++i) {
    const auto id = FilterId(static_cast<std::uint8_t>(i));
    if (filter_plugin(id).name == name) return id;
  }
  throw std::out_of_range(fmt::format("no filter named {}", name));
}

std::string_view filter_name(FilterId id) { return id == kFits ? "fits" : filter_plugin(id).name; }

std::string filter_phrase(FilterId id, const PodRequest& pod) {
  return id == kFits ? "fit" : filter_plugin(id).phrase(pod);
}

std::ostream& operator<<(std::ostream& os, FilterId id) {
  if (id != kFits && filter_index(id) > filter_count()) {
    return os << "filter " << filter_index(id);
  }
  return os << filter_name(id);
}

FilterRegistration::FilterRegistration(const FilterPlugin& plugin) {
  const bool checks = plugin.stage == FilterStage::kNode
                          ? plugin.filter_node != nullptr
                          : plugin.filter != nullptr && plugin.filter_empty != nullptr;
  if (!checks || plugin.phrase == nullptr || plugin.name.empty()) {
    throw std::invalid_argument(
        fmt::format("filter '{}' needs a name, a phrase and its stage's check", plugin.name));
  }
  if (filter_count() + 1 >= kMaxFilters) {
    throw std::invalid_argument(
        fmt::format("no room for filter {}: at most {} filters", plugin.name, kMaxFilters - 1));
  }
  for (std::size_t i = 1; i <= filter_count(); ++i) {
    if (filter_plugin(FilterId(static_cast<std::uint8_t>(i))).name == plugin.name) {
      throw std::invalid_argument(fmt::format("a filter named {} is registered", plugin.name));
    }
  }
  detail::registered_filters.push_back(plugin);
  id_ = FilterId(static_cast<std::uint8_t>(filter_count()));
}

FilterRegistration::~FilterRegistration() {
  // Ids are places: only the last registration can leave without renumbering the others.
  assert(filter_index(id_) == filter_count());
  detail::registered_filters.pop_back();
}

}  // namespace gpuorch::sched

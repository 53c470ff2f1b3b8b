#pragma once
// The filter registry: the built-in filters (builtin_filters.hpp) and those registered beyond
// them, as kube-scheduler's out-of-tree plugins are (app.WithPlugin). Ids are places in the
// registry, from 1: the built-in ones first, then registrations in their order. Per-filter counts
// (FilterDiagnosis), machine-readable keys and explanations all go through it, so a new filter is
// explained, counted and keyed without an edit anywhere else.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "gpuorch/sched/framework/filter_id.hpp"
#include "gpuorch/sched/framework/filter_plugin.hpp"

namespace gpuorch::sched {

// Filters registered so far, built-in and others: ids run from 1 to filter_count().
[[nodiscard]] std::size_t filter_count();
// id must be a registered filter's (not kFits).
[[nodiscard]] const FilterPlugin& filter_plugin(FilterId id);
// The id of the filter of that name; throws std::out_of_range for an unknown name.
[[nodiscard]] FilterId filter_id(std::string_view name);

// Short, stable names for machine-readable output ("gpu-model", "cpu", ...); "fits" for kFits.
[[nodiscard]] std::string_view filter_name(FilterId id);
// What a node this filter rejected lacks, phrased for this pod; "fit" for kFits.
[[nodiscard]] std::string filter_phrase(FilterId id, const PodRequest& pod);

// Registers a filter beyond the built-in ones for as long as the registration lives. Register
// before the first scheduling decision (program start, a test's set-up) and end registrations in
// reverse order: caches (the score index, RequestResolver's verdicts) hold ids and verdicts, and
// decisions from several threads read the registry without a lock.
class FilterRegistration {
 public:
  // Throws std::invalid_argument when the name is taken, the plugin lacks its check for its
  // stage, or the registry is full (kMaxFilters).
  explicit FilterRegistration(const FilterPlugin& plugin);
  ~FilterRegistration();
  FilterRegistration(const FilterRegistration&) = delete;
  FilterRegistration& operator=(const FilterRegistration&) = delete;

  [[nodiscard]] FilterId id() const { return id_; }

 private:
  FilterId id_;
};

namespace detail {
// The registrations, read by check_node after the built-in filters. Only FilterRegistration
// writes it.
inline std::vector<FilterPlugin> registered_filters;
}  // namespace detail

}  // namespace gpuorch::sched

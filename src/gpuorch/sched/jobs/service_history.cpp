#include "gpuorch/sched/jobs/service_history.hpp"

#include <algorithm>

namespace gpuorch::sched::jobs {

void ServiceHistory::Sorted::add(double service) {
  services.insert(std::upper_bound(services.begin(), services.end(), service), service);
  // A job finishes once, so rebuilding the sums costs O(jobs) per finished job, once.
  suffix.assign(services.size() + 1, 0.0);
  for (std::size_t k = services.size(); k-- > 0;) suffix[k] = suffix[k + 1] + services[k];
}

std::optional<double> ServiceHistory::Sorted::excess(double attained, std::size_t min_jobs) const {
  const auto at = std::upper_bound(services.begin(), services.end(), attained);
  const auto i = static_cast<std::size_t>(at - services.begin());
  const std::size_t longer = services.size() - i;
  if (longer == 0 || longer < min_jobs) return std::nullopt;
  return suffix[i] / double(longer) - attained;
}

void ServiceHistory::finished(const std::string& model, double service) {
  by_model_[model].add(service);
  all_.add(service);
}

std::optional<double> ServiceHistory::expected_remaining_own(const std::string& model,
                                                             double attained) const {
  const auto it = by_model_.find(model);
  if (it == by_model_.end()) return std::nullopt;
  return it->second.excess(attained, min_jobs_);
}

std::optional<double> ServiceHistory::expected_remaining(const std::string& model,
                                                         double attained) const {
  if (auto own = expected_remaining_own(model, attained)) return own;
  return all_.excess(attained, min_jobs_);
}

}  // namespace gpuorch::sched::jobs

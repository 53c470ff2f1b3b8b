#pragma once
// What a cluster knows of how much service the jobs of one model need: the GPU-seconds each
// finished job of it held. A model that is trained again and again needs about the same service
// each time, so a job's expected remaining service follows from its attained service and its
// model's finished jobs (E[S - a | S > a], as in distribution-based schedulers such as 3Sigma),
// without anything the job itself must declare. Before enough jobs of a model have finished,
// the finished jobs of every model stand in for it; before that, nothing is known.
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpuorch::sched::jobs {

class ServiceHistory {
 public:
  // At least this many finished jobs that ran longer than a job's attained service make an
  // estimate for it (fewer: the next wider pool, or none).
  explicit ServiceHistory(std::size_t min_jobs = 3) : min_jobs_(min_jobs) {}

  // A job of `model` finished after holding `service` GPU-seconds.
  void finished(const std::string& model, double service);
  // Expected GPU-seconds left for a job of `model` that has held `attained`: the mean excess
  // over `attained` of the finished jobs of its model that held more, or of every model's when
  // its own has fewer than `min_jobs` such jobs; nullopt when neither has enough.
  [[nodiscard]] std::optional<double> expected_remaining(const std::string& model,
                                                         double attained) const;
  // The same from the finished jobs of `model` alone.
  [[nodiscard]] std::optional<double> expected_remaining_own(const std::string& model,
                                                             double attained) const;
  [[nodiscard]] std::size_t size() const { return all_.services.size(); }

 private:
  // Services in ascending order with their suffix sums, so an estimate is a binary search.
  struct Sorted {
    std::vector<double> services;
    std::vector<double> suffix;  // suffix[i] = sum of services[i..]; one entry more (0)
    void add(double service);
    [[nodiscard]] std::optional<double> excess(double attained, std::size_t min_jobs) const;
  };
  std::size_t min_jobs_;
  std::map<std::string, Sorted> by_model_;
  Sorted all_;
};

}  // namespace gpuorch::sched::jobs

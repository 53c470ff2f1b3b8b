#include "gpuorch/sim/timeline_goodput.hpp"

#include "gpuorch/sim/timeline_policy.hpp"

namespace gpuorch::sim {

double GoodputTable::rate(const Job& job, int gpus, bool adaptive) {
  if (gpus <= 0) return 0;
  const AppProfile* app = job.app();
  if (app == nullptr) return 1;
  const bool fixed = !adaptive || app->name() == "ncf";
  const auto key = std::make_tuple(app, job.epoch(), gpus, fixed ? job.spec().batch : 0);
  const auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const auto placement = packed_placement(gpus, per_node_);
  const BatchConfig b = fixed ? fixed_batch_config(*app, gpus, job.spec().batch, false)
                              : best_batch_config(*app, placement, job.epoch());
  const double r = progress_rate(*app, placement, b, job.epoch()).progress_per_s;
  cache_.emplace(key, r);
  return r;
}

std::vector<int> greedy_counts(const std::vector<std::vector<double>>& value, int total) {
  const std::size_t n = value.size();
  std::vector<int> count(n, 0);
  // Per job: the best (gain per GPU, target count) from its current count; recomputed only for
  // the job that moved.
  std::vector<std::pair<double, int>> best(n);
  int left = total;
  auto refresh = [&](std::size_t j) {
    best[j] = {0.0, -1};
    const auto& v = value[j];
    for (int r = count[j] + 1; r < static_cast<int>(v.size()) && r - count[j] <= left; ++r) {
      const double g = (v[static_cast<std::size_t>(r)] - v[static_cast<std::size_t>(count[j])]) /
                       (r - count[j]);
      if (g > best[j].first) best[j] = {g, r};
    }
  };
  for (std::size_t j = 0; j < n; ++j) refresh(j);
  while (left > 0) {
    std::size_t pick = n;
    for (std::size_t j = 0; j < n; ++j) {
      if (best[j].second >= 0 && (pick == n || best[j].first > best[pick].first)) pick = j;
    }
    if (pick == n) break;
    left -= best[pick].second - count[pick];
    count[pick] = best[pick].second;
    // Fewer GPUs left can invalidate other jobs' targets.
    for (std::size_t j = 0; j < n; ++j) {
      if (j == pick || best[j].second - count[j] > left) refresh(j);
    }
  }
  return count;
}

}  // namespace gpuorch::sim

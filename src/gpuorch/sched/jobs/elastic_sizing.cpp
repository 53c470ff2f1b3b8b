#include "gpuorch/sched/jobs/elastic_sizing.hpp"

#include <algorithm>
#include <functional>
#include <limits>

namespace gpuorch::sched::jobs {
namespace {

constexpr double kSlack = 1e-6;  // GPUs: the tree's shares are sums of fractions

// The greedy search over one budget per queue (and one for the cluster): each step takes the job
// and larger count with the best value gain per added GPU that both budgets still allow.
class Greedy {
 public:
  Greedy(std::span<const ElasticDemand> d, const SizingOptions& o, double gpus)
      : d_(d), o_(o), count_(d.size(), 0), best_(d.size()), left_(gpus) {}

  void set_queue_budgets(std::vector<double> budgets) { queue_left_ = std::move(budgets); }
  // What jobs keep comes off the budgets before any value counts.
  void keep() {
    for (std::size_t j = 0; j < d_.size(); ++j) {
      const int most = std::max(0, int(d_[j].value.size()) - 1);
      if (d_[j].keep > 0) spend(j, std::min(d_[j].keep, most));
    }
  }
  [[nodiscard]] std::vector<double> queue_budgets() const { return queue_left_; }
  // Only jobs of this priority take part in the next steps.
  void set_level(int priority) { level_ = priority; }

  // Optimus's first pass: the minimum of each job in order, while the budgets allow.
  void give_minimums() {
    for (std::size_t j = 0; j < d_.size(); ++j) {
      if (d_[j].priority != level_) continue;
      const int lo = std::max(1, d_[j].min);
      if (count_[j] >= lo || lo >= int(d_[j].value.size())) continue;
      const double cost = step_cost(j, lo);
      if (cost > allowance(j) + kSlack) continue;
      spend(j, lo);
    }
  }

  void grow() {
    for (std::size_t j = 0; j < d_.size(); ++j) refresh(j);
    for (;;) {
      std::size_t pick = d_.size();
      for (std::size_t j = 0; j < d_.size(); ++j) {
        if (best_[j].second >= 0 && (pick == d_.size() || best_[j].first > best_[pick].first)) {
          pick = j;
        }
      }
      if (pick == d_.size()) return;
      spend(pick, best_[pick].second);
      // Smaller budgets can invalidate other jobs' best steps.
      for (std::size_t j = 0; j < d_.size(); ++j) {
        if (j == pick || step_cost(j, best_[j].second) > allowance(j) + kSlack) refresh(j);
      }
    }
  }

  [[nodiscard]] const std::vector<int>& counts() const { return count_; }

 private:
  [[nodiscard]] double allowance(std::size_t j) const {
    return queue_left_.empty() ? left_ : std::min(left_, queue_left_[d_[j].queue]);
  }
  [[nodiscard]] double step_cost(std::size_t j, int to) const {
    // A replica without GPUs costs one milli-GPU here, so its gain per GPU stays finite.
    return to < 0 ? 0.0 : double(to - count_[j]) * std::max(d_[j].gpus_per_replica, 1e-3);
  }

  void spend(std::size_t j, int to) {
    const double cost = step_cost(j, to);
    left_ -= cost;
    if (!queue_left_.empty()) queue_left_[d_[j].queue] -= cost;
    count_[j] = to;
  }

  void refresh(std::size_t j) {
    best_[j] = {0.0, -1};
    if (d_[j].priority != level_) return;
    const auto& v = d_[j].value;
    const int now = count_[j];
    // A job below its gang minimum grows only through its minimum (Optimus gives it first).
    if (o_.min_first && now < std::max(1, d_[j].min)) return;
    const int last = o_.single_steps ? std::min(now + 1, int(v.size()) - 1) : int(v.size()) - 1;
    const double room = allowance(j);
    for (int r = std::max(now + 1, d_[j].min); r <= last; ++r) {
      const double cost = step_cost(j, r);
      if (cost > room + kSlack) break;
      const double g = (v[std::size_t(r)] - v[std::size_t(now)]) / cost;
      if (g > best_[j].first) best_[j] = {g, r};
    }
  }

  std::span<const ElasticDemand> d_;
  const SizingOptions& o_;
  std::vector<int> count_;
  std::vector<std::pair<double, int>> best_;  // per job: (gain per GPU, count) of its best step
  double left_;
  std::vector<double> queue_left_;  // by queue index; empty: no per-queue budget
  int level_ = 0;
};

}  // namespace

std::vector<int> size_by_value(const QueueTree& tree, double gpus,
                               std::span<const ElasticDemand> demands,
                               const SizingOptions& options) {
  // What each queue's jobs could use, in milli-GPUs as the tree divides them.
  std::vector<Amounts> want(tree.size(), Amounts{});
  for (const ElasticDemand& d : demands) {
    const double most = double(std::max<std::size_t>(d.value.size(), 1) - 1);
    want[d.queue][0] += most * d.gpus_per_replica * 1000.0;
  }
  Amounts capacity{};
  capacity[0] = gpus * 1000.0;
  const std::vector<Amounts> share = tree.fair_shares(want, capacity);
  std::vector<double> budgets(tree.size(), 0.0);
  for (std::size_t q = 0; q < tree.size(); ++q) budgets[q] = share[q][0] / 1000.0;

  std::vector<int> levels;
  for (const ElasticDemand& d : demands) levels.push_back(d.priority);
  std::sort(levels.begin(), levels.end(), std::greater<>());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  Greedy greedy(demands, options, gpus);
  auto pass = [&] {
    for (const int level : levels) {
      greedy.set_level(level);
      if (options.min_first) greedy.give_minimums();
      greedy.grow();
    }
  };
  // Within each queue's fair share first...
  greedy.set_queue_budgets(budgets);
  greedy.keep();
  pass();
  // ...then what the queues left, to the best gains anywhere, up to each queue's limit (a
  // parent's limit is the round's to hold: JobLayer waits such a job as over-limit).
  std::vector<double> room = greedy.queue_budgets();
  for (std::size_t q = 0; q < tree.size(); ++q) {
    room[q] = tree.limit(q)[0] / 1000.0 - (budgets[q] - room[q]);
  }
  greedy.set_queue_budgets(std::move(room));
  pass();
  return greedy.counts();
}

}  // namespace gpuorch::sched::jobs

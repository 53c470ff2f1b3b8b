#include "gpuorch/sched/jobs/elastic_sizing.hpp"

#include <algorithm>
#include <functional>
#include <limits>

namespace gpuorch::sched::jobs {
namespace {

constexpr double kSlack = 1e-6;             // the tree's shares are sums of fractions
constexpr std::size_t kNoModel = SIZE_MAX;  // not counted in a model's slot, or not chosen yet

[[nodiscard]] bool model_slot(std::size_t m) { return m >= kFirstModelSlot && m < kResourceKinds; }

// Amounts in the search's units: GPUs (not milli), CPU milli, memory MiB.
Amounts operator*(Amounts a, double k) {
  for (double& x : a) x *= k;
  return a;
}

// The greedy search over one budget per queue (and one for the cluster): each step takes the job
// and larger count with the best value gain per added GPU (per dominant share, in GPUs, when CPU
// or memory count) that both budgets still allow.
class Greedy {
 public:
  Greedy(std::span<const ElasticDemand> d, const SizingOptions& o, const Amounts& capacity)
      : d_(d),
        o_(o),
        count_(d.size(), 0),
        best_(d.size()),
        model_(d.size(), kNoModel),
        best_model_(d.size(), kNoModel),
        capacity_(capacity),
        left_(capacity) {
    // A job with one model (a running one, or one restricted to it) is on it from the start.
    for (std::size_t j = 0; j < d_.size(); ++j) {
      if (d_[j].models.size() == 1) model_[j] = d_[j].models.front();
    }
  }

  void set_queue_budgets(std::vector<Amounts> budgets) { queue_left_ = std::move(budgets); }
  // What jobs keep comes off the budgets before any value counts.
  void keep() {
    for (std::size_t j = 0; j < d_.size(); ++j) {
      const int most = std::max(0, int(d_[j].value.size()) - 1);
      if (d_[j].keep > 0) spend(j, std::min(d_[j].keep, most), model_[j]);
    }
  }
  [[nodiscard]] std::vector<Amounts> queue_budgets() const { return queue_left_; }
  // Only jobs of this priority take part in the next steps.
  void set_level(int priority) { level_ = priority; }

  // Optimus's first pass: the minimum of each job in order, while the budgets allow.
  void give_minimums() {
    for (std::size_t j = 0; j < d_.size(); ++j) {
      if (d_[j].priority != level_) continue;
      const int lo = std::max(1, d_[j].min);
      if (count_[j] >= lo || lo >= int(d_[j].value.size())) continue;
      bool done = false;
      for_each_choice(j, [&](std::size_t m) {
        if (done || !fits(j, step_cost(j, lo, m))) return;
        spend(j, lo, m);
        done = true;
      });
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
      const bool moved = count_[pick] > 0 && best_model_[pick] != model_[pick];
      spend(pick, best_[pick].second, best_model_[pick]);
      // Smaller budgets can invalidate other jobs' best steps; a move frees its old model, where
      // others may now grow further.
      for (std::size_t j = 0; j < d_.size(); ++j) {
        if (moved || j == pick || !fits(j, step_cost(j, best_[j].second, best_model_[j]))) {
          refresh(j);
        }
      }
    }
  }

  [[nodiscard]] const std::vector<int>& counts() const { return count_; }
  [[nodiscard]] const std::vector<std::size_t>& models() const { return model_; }

 private:
  [[nodiscard]] bool counted(std::size_t k) const { return k == 0 || capacity_[k] > 0; }
  [[nodiscard]] bool fits(std::size_t j, const Amounts& cost) const {
    for (std::size_t k = 0; k < kResourceKinds; ++k) {
      if (!counted(k)) continue;
      double room = left_[k];
      if (!queue_left_.empty()) room = std::min(room, queue_left_[d_[j].queue][k]);
      if (cost[k] > room + kSlack) return false;
    }
    return true;
  }
  // The models job j may grow on: the one it is on first, then, for a waiting job that accepts
  // several (it has not started, so moving it costs nothing), the others in its order.
  // (A callback, not a list: refresh runs for every job at every step.)
  template <typename F>
  void for_each_choice(std::size_t j, F&& f) const {
    const bool several = d_[j].models.size() > 1;
    if (!several || model_[j] != kNoModel) f(model_[j]);
    if (!several) return;
    for (const std::size_t m : d_[j].models) {
      if (m != model_[j]) f(m);
    }
  }
  // Growing job j to `to` replicas on model slot m (kNoModel or a model no queue names: `gpu`
  // only); on another model than its own, its replicas there move (all of them: one model).
  [[nodiscard]] Amounts step_cost(std::size_t j, int to, std::size_t m) const {
    // A replica without GPUs costs one milli-GPU here, so its gain per GPU stays finite.
    if (to < 0) return Amounts{};
    const Amounts per_replica = {std::max(d_[j].gpus_per_replica, 1e-3),
                                 d_[j].cpu_milli_per_replica, d_[j].memory_mib_per_replica};
    Amounts cost = per_replica * double(to - count_[j]);
    const double gpus = d_[j].gpus_per_replica;
    if (model_slot(m)) cost[m] = gpus * double(m == model_[j] ? to - count_[j] : to);
    if (m != model_[j] && model_slot(model_[j])) cost[model_[j]] = -gpus * double(count_[j]);
    return cost;
  }
  // What a step costs in GPUs: its GPUs, or more when its CPU or memory is a larger share of
  // the cluster's (dominant resource fairness). Not a model's slot: a GPU of a scarce model is
  // still one GPU of value per GPU, and only jobs on that model compete for it.
  [[nodiscard]] double dominant(const Amounts& cost) const {
    double d = cost[0];
    for (std::size_t k = 1; k < kFirstModelSlot; ++k) {
      if (counted(k) && cost[k] > 0 && capacity_[0] > 0) {
        d = std::max(d, cost[k] / capacity_[k] * capacity_[0]);
      }
    }
    return d;
  }

  void spend(std::size_t j, int to, std::size_t m) {
    const Amounts cost = step_cost(j, to, m);
    for (std::size_t k = 0; k < kResourceKinds; ++k) {
      left_[k] -= cost[k];
      if (!queue_left_.empty()) queue_left_[d_[j].queue][k] -= cost[k];
    }
    count_[j] = to;
    model_[j] = m;  // all its replicas on one model
  }

  void refresh(std::size_t j) {
    best_[j] = {0.0, -1};
    best_model_[j] = model_[j];
    if (d_[j].priority != level_) return;
    const auto& v = d_[j].value;
    const int now = count_[j];
    // A job below its gang minimum grows only through its minimum (Optimus gives it first).
    if (o_.min_first && now < std::max(1, d_[j].min)) return;
    const int last = o_.single_steps ? std::min(now + 1, int(v.size()) - 1) : int(v.size()) - 1;
    // Its value does not depend on the model: a step elsewhere wins only with a larger gain
    // (a count its model has no room for), so it stays on its model, or takes the first of its
    // queue's order, where it can (Kueue's flavor order, TryNextFlavor).
    for_each_choice(j, [&](std::size_t m) {
      for (int r = std::max(now + 1, d_[j].min); r <= last; ++r) {
        const Amounts cost = step_cost(j, r, m);
        if (!fits(j, cost)) break;
        const double g = (v[std::size_t(r)] - v[std::size_t(now)]) / dominant(cost);
        if (g > best_[j].first) {
          best_[j] = {g, r};
          best_model_[j] = m;
        }
      }
    });
  }

  std::span<const ElasticDemand> d_;
  const SizingOptions& o_;
  std::vector<int> count_;
  std::vector<std::pair<double, int>> best_;  // per job: (gain per GPU, count) of its best step
  std::vector<std::size_t> model_;       // per job: the model slot it is on (kNoModel: none yet)
  std::vector<std::size_t> best_model_;  // per job: the model of its best step
  Amounts capacity_;
  Amounts left_;
  std::vector<Amounts> queue_left_;  // by queue index; empty: no per-queue budget
  int level_ = 0;
};

}  // namespace

namespace {

// `gpus` in GPUs; `capacity`'s CPU and memory in the tree's units (its GPU entry is not read).
Sized size_within(const QueueTree& tree, double gpus, Amounts capacity,
                  std::span<const ElasticDemand> demands, const SizingOptions& options) {
  // The tree's units (GPU milli) over the search's (GPUs), kind by kind.
  // (A GPU model's slot, like the GPU total, counts milli-GPUs.)
  Amounts per_search_unit;
  per_search_unit.fill(1000.0);
  per_search_unit[1] = per_search_unit[2] = 1.0;
  capacity[0] = gpus * 1000.0;
  // What each queue's jobs could use, as the tree divides it; kinds the capacity does not count
  // are divided as wanted (their shares then bound nothing).
  std::vector<Amounts> want(tree.size(), Amounts{});
  Amounts wanted{};
  for (const ElasticDemand& d : demands) {
    const double most = double(std::max<std::size_t>(d.value.size(), 1) - 1);
    const Amounts most_of = {most * d.gpus_per_replica * 1000.0, most * d.cpu_milli_per_replica,
                             most * d.memory_mib_per_replica};
    for (std::size_t k = 0; k < kResourceKinds; ++k) {
      want[d.queue][k] += most_of[k];
      wanted[k] += most_of[k];
    }
    // A job that may take any of several models wants each of them (it takes one), as the
    // round's fair shares count it.
    for (const std::size_t m : d.models) {
      if (!model_slot(m)) continue;
      want[d.queue][m] += most_of[0];
      wanted[m] += most_of[0];
    }
  }
  Amounts divided = capacity;
  Amounts search{};
  search[0] = gpus;
  for (std::size_t k = 1; k < kResourceKinds; ++k) {
    if (!(capacity[k] > 0)) divided[k] = wanted[k];
    search[k] = capacity[k] > 0 ? capacity[k] / per_search_unit[k] : 0.0;
  }
  const std::vector<Amounts> share = tree.fair_shares(want, divided);
  std::vector<Amounts> budgets(tree.size(), Amounts{});
  for (std::size_t q = 0; q < tree.size(); ++q) {
    for (std::size_t k = 0; k < kResourceKinds; ++k) {
      budgets[q][k] = share[q][k] / per_search_unit[k];
    }
  }

  std::vector<int> levels;
  for (const ElasticDemand& d : demands) levels.push_back(d.priority);
  std::sort(levels.begin(), levels.end(), std::greater<>());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  Greedy greedy(demands, options, search);
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
  std::vector<Amounts> room = greedy.queue_budgets();
  for (std::size_t q = 0; q < tree.size(); ++q) {
    for (std::size_t k = 0; k < kResourceKinds; ++k) {
      room[q][k] = tree.limit(q)[k] / per_search_unit[k] - (budgets[q][k] - room[q][k]);
    }
  }
  greedy.set_queue_budgets(std::move(room));
  pass();
  return {greedy.counts(), greedy.models()};
}

}  // namespace

std::vector<int> size_by_value(const QueueTree& tree, double gpus,
                               std::span<const ElasticDemand> demands,
                               const SizingOptions& options) {
  return size_within(tree, gpus, Amounts{}, demands, options).counts;
}

std::vector<int> size_by_value(const QueueTree& tree, const Amounts& capacity,
                               std::span<const ElasticDemand> demands,
                               const SizingOptions& options) {
  return size_within(tree, capacity[0] / 1000.0, capacity, demands, options).counts;
}

Sized size_by_value_per_model(const QueueTree& tree, const Amounts& capacity,
                              std::span<const ElasticDemand> demands,
                              const SizingOptions& options) {
  return size_within(tree, capacity[0] / 1000.0, capacity, demands, options);
}

}  // namespace gpuorch::sched::jobs

#include "gpuorch/sched/gpu_picker.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <tuple>

#include "gpuorch/base/units.hpp"
#include "gpuorch/sched/policy.hpp"
#include "gpuorch/topology/link_scores.hpp"

namespace gpuorch::sched {
namespace {

// C(n, k), or any value above kExactPickLimit once it gets there.
long long choose(std::size_t n, std::size_t k) {
  if (k > n) return 0;
  long long c = 1;
  for (std::size_t i = 1; i <= k; ++i) {
    c = c * static_cast<long long>(n - k + i) / static_cast<long long>(i);
    if (c > kExactPickLimit) return c;
  }
  return c;
}

// How good a set is: the weakest pair (higher wins), the sum of its pairs (higher wins), then
// its members' strengths to the candidates left over (lower wins). Sums and leaks count the link
// classes first and the same-NUMA bits only on a tie (topology/link_scores.hpp), so many NUMA
// bits never outweigh one better link.
struct Key {
  long long weakest = std::numeric_limits<long long>::max();  // no pair yet
  long long sum = 0;
  long long sum_numa = 0;
  long long leak = 0;
  long long leak_numa = 0;

  void add_pair(long long v) {
    weakest = std::min(weakest, v);
    sum += topology::gpu_link_class(static_cast<int>(v));
    sum_numa += topology::gpu_link_numa(static_cast<int>(v));
  }
  void add_leak(long long v) {
    leak += topology::gpu_link_class(static_cast<int>(v));
    leak_numa += topology::gpu_link_numa(static_cast<int>(v));
  }
  [[nodiscard]] auto order() const { return std::tuple(weakest, sum, sum_numa, -leak, -leak_numa); }
};

bool better(const Key& a, const Key& b) { return a.order() > b.order(); }

bool same(const Key& a, const Key& b) { return a.order() == b.order(); }

class Search {
 public:
  Search(std::size_t n, std::span<const int> links, std::vector<int> candidates,
         std::vector<int> fixed, std::size_t count)
      : n_(n),
        links_(links),
        candidates_(std::move(candidates)),
        fixed_(std::move(fixed)),
        count_(count),
        in_set_(n, 0) {}

  std::vector<int> run() {
    const std::size_t wanted = count_ - fixed_.size();
    set_ = fixed_;
    for (const int f : fixed_) in_set_[static_cast<std::size_t>(f)] = 1;
    if (choose(candidates_.size(), wanted) <= kExactPickLimit) {
      exhaustive(0, wanted);
    } else {
      greedy();
    }
    return best_;
  }

 private:
  [[nodiscard]] long long at(int a, int b) const {
    return links_[static_cast<std::size_t>(a) * n_ + static_cast<std::size_t>(b)];
  }

  [[nodiscard]] Key key() const {
    Key k;
    for (std::size_t i = 0; i < set_.size(); ++i) {
      for (std::size_t j = i + 1; j < set_.size(); ++j) {
        k.add_pair(at(set_[i], set_[j]));
      }
    }
    for (const int m : set_) {
      for (const int c : candidates_) {
        if (!in_set_[static_cast<std::size_t>(c)]) k.add_leak(at(m, c));
      }
    }
    return k;
  }

  void consider() {
    const Key k = key();
    std::vector<int> sorted = set_;
    std::sort(sorted.begin(), sorted.end());
    if (best_.empty() || better(k, best_key_) || (same(k, best_key_) && sorted < best_)) {
      best_key_ = k;
      best_ = std::move(sorted);
    }
  }

  void add(int c) {
    set_.push_back(c);
    in_set_[static_cast<std::size_t>(c)] = 1;
  }
  void remove_last() {
    in_set_[static_cast<std::size_t>(set_.back())] = 0;
    set_.pop_back();
  }

  // Every combination of `left` more candidates from position `from` on, in lexicographic order.
  void exhaustive(std::size_t from, std::size_t left) {
    if (left == 0) {
      consider();
      return;
    }
    for (std::size_t i = from; i + left <= candidates_.size(); ++i) {
      add(candidates_[i]);
      exhaustive(i + 1, left - 1);
      remove_last();
    }
  }

  // From each candidate as a seed (with the fixed members), add the candidate whose weakest link
  // to the set is strongest, then the best connected to it, then the least connected to the
  // candidates still out, then the lowest; the best completed set by the full key wins.
  void greedy() {
    for (const int seed : candidates_) {
      add(seed);
      while (set_.size() < count_) {
        int pick = -1;
        Key pick_key;
        for (const int c : candidates_) {
          if (in_set_[static_cast<std::size_t>(c)]) continue;
          Key k;
          for (const int m : set_) k.add_pair(at(c, m));
          for (const int d : candidates_) {
            if (d != c && !in_set_[static_cast<std::size_t>(d)]) k.add_leak(at(c, d));
          }
          if (pick < 0 || better(k, pick_key)) {
            pick = c;
            pick_key = k;
          }
        }
        add(pick);
      }
      consider();
      while (set_.size() > fixed_.size()) remove_last();
    }
  }

  std::size_t n_;
  std::span<const int> links_;
  std::vector<int> candidates_;  // ascending, none of them fixed
  std::vector<int> fixed_;       // ascending
  std::size_t count_;
  std::vector<char> in_set_;
  std::vector<int> set_;
  std::vector<int> best_;
  Key best_key_;
};

std::vector<int> sorted_unique(std::span<const int> v, std::size_t n, const char* what) {
  std::vector<int> out(v.begin(), v.end());
  for (const int i : out) {
    if (i < 0 || static_cast<std::size_t>(i) >= n) {
      throw std::invalid_argument(
          fmt::format("GPU picker: {} index {} outside a {}-device matrix", what, i, n));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

std::vector<int> pick_connected(std::size_t n, std::span<const int> links,
                                std::span<const int> candidates, std::span<const int> fixed,
                                int count) {
  if (links.size() != n * n) {
    throw std::invalid_argument(
        fmt::format("GPU picker: a link matrix of {} entries for {} devices (needs {})",
                    links.size(), n, n * n));
  }
  std::vector<int> must = sorted_unique(fixed, n, "fixed");
  std::vector<int> pool = sorted_unique(candidates, n, "candidate");
  std::erase_if(pool, [&](int c) { return std::binary_search(must.begin(), must.end(), c); });
  const std::size_t wanted = static_cast<std::size_t>(std::max(0, count));
  if (wanted <= must.size()) return must;
  if (must.size() + pool.size() <= wanted) {
    std::vector<int> all = must;
    all.insert(all.end(), pool.begin(), pool.end());
    std::sort(all.begin(), all.end());
    return all;
  }
  return Search(n, links, std::move(pool), std::move(must), wanted).run();
}

std::vector<int> pick_gpus(std::span<const std::int32_t> gpu_left, int count,
                           std::span<const std::uint8_t> links) {
  if (links.empty()) return lowest_free_gpus(gpu_left, count);
  const std::size_t n = gpu_left.size();
  if (links.size() != n * n) {
    throw std::invalid_argument(fmt::format(
        "GPU picker: a link matrix of {} entries for a node of {} GPUs", links.size(), n));
  }
  std::vector<int> free;
  for (std::size_t g = 0; g < n; ++g) {
    if (gpu_left[g] == base::kMilliPerGpu) free.push_back(static_cast<int>(g));
  }
  if (static_cast<int>(free.size()) <= count) return free;
  const std::vector<int> strength(links.begin(), links.end());
  return pick_connected(n, strength, free, {}, count);
}

std::vector<int> pick_gpus_in_groups(std::span<const std::int32_t> gpu_left, int count,
                                     std::span<const std::uint8_t> links,
                                     std::span<const std::vector<int>> groups) {
  const std::size_t n = gpu_left.size();
  if (!links.empty() && links.size() != n * n) {
    throw std::invalid_argument(fmt::format(
        "GPU picker: a link matrix of {} entries for a node of {} GPUs", links.size(), n));
  }
  const std::vector<int> strength(links.begin(), links.end());
  std::vector<int> free_anywhere;
  for (std::size_t g = 0; g < n; ++g) {
    if (gpu_left[g] == base::kMilliPerGpu) free_anywhere.push_back(static_cast<int>(g));
  }
  std::vector<int> best;
  Key best_key;
  for (const auto& group : groups) {
    std::vector<int> free;
    for (const int g : group) {
      if (g >= 0 && static_cast<std::size_t>(g) < n &&
          gpu_left[static_cast<std::size_t>(g)] == base::kMilliPerGpu) {
        free.push_back(g);
      }
    }
    std::sort(free.begin(), free.end());
    free.erase(std::unique(free.begin(), free.end()), free.end());
    if (count <= 0 || static_cast<int>(free.size()) < count) continue;
    if (links.empty()) return {free.begin(), free.begin() + count};
    std::vector<int> set = pick_connected(n, strength, free, {}, count);
    Key k;
    for (std::size_t i = 0; i < set.size(); ++i) {
      for (std::size_t j = i + 1; j < set.size(); ++j) {
        k.add_pair(
            strength[static_cast<std::size_t>(set[i]) * n + static_cast<std::size_t>(set[j])]);
      }
      for (const int c : free_anywhere) {
        if (!std::binary_search(set.begin(), set.end(), c)) {
          k.add_leak(strength[static_cast<std::size_t>(set[i]) * n + static_cast<std::size_t>(c)]);
        }
      }
    }
    if (best.empty() || better(k, best_key) || (same(k, best_key) && set < best)) {
      best = std::move(set);
      best_key = k;
    }
  }
  return best;
}

}  // namespace gpuorch::sched

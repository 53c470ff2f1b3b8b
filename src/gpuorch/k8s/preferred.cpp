#include "gpuorch/k8s/preferred.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace gpuorch::k8s {
namespace {

using topology::Path;

// Above this many candidate sets the search is greedy instead of exhaustive.
constexpr long long kExhaustiveLimit = 20000;

long long choose(long long n, long long k) {
  if (k < 0 || k > n) return 0;
  long long c = 1;
  for (long long i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;
    if (c > kExhaustiveLimit) return c;
  }
  return c;
}

struct Candidate {
  std::string id;
  const PhysicalDevice* dev = nullptr;
};

std::vector<Candidate> lookup(const Resource& r, const std::vector<std::string>& ids) {
  std::vector<Candidate> out;
  for (const auto& id : ids) {
    const PhysicalDevice* d = find_physical(r, id);
    if (!d) {
      throw std::invalid_argument(fmt::format(
          "invalid preferred allocation request for '{}': unknown device: {}", r.name, id));
    }
    if (std::none_of(out.begin(), out.end(), [&](const Candidate& c) { return c.id == id; })) {
      out.push_back({id, d});
    }
  }
  return out;
}

// Replicas: fill from the GPUs with the most replicas still free (the least shared), the
// "distributed" policy of NVIDIA's plugin; ties go to the best-connected GPU, then the first.
std::vector<std::string> distributed(const topology::Host& host, const Resource& r,
                                     const std::vector<Candidate>& avail,
                                     std::vector<std::string> chosen, int size) {
  std::map<const PhysicalDevice*, int> free_replicas, taken;
  for (const auto& c : avail) ++free_replicas[c.dev];
  for (const auto& id : chosen) ++taken[find_physical(r, id)];
  while (static_cast<int>(chosen.size()) < size) {
    const Candidate* best = nullptr;
    std::tuple<int, int, int> best_key{};
    for (const auto& c : avail) {
      if (std::find(chosen.begin(), chosen.end(), c.id) != chosen.end()) continue;
      int link = 0;
      for (const auto& [dev, n] : taken) {
        if (n > 0 && dev != c.dev) link += pair_score(host, r, *c.dev, *dev);
      }
      // Fewer replicas already given to this container, more still free, better connected.
      const std::tuple<int, int, int> key{-taken[c.dev], free_replicas[c.dev], link};
      if (!best || key > best_key) {
        best = &c;
        best_key = key;
      }
    }
    if (!best) break;
    chosen.push_back(best->id);
    ++taken[best->dev];
    --free_replicas[best->dev];
  }
  return chosen;
}

struct SetSearch {
  const topology::Host& host;
  const Resource& r;
  const std::vector<Candidate>& avail;
  std::vector<std::vector<int>> score;  // pair scores between avail entries
  std::vector<int> fixed;               // indices into avail, must_include
  std::vector<int> best;
  long long best_score = -1, best_leak = 0;

  long long set_score(const std::vector<int>& set) const {
    long long s = 0;
    for (std::size_t i = 0; i < set.size(); ++i) {
      for (std::size_t j = i + 1; j < set.size(); ++j) {
        s += score[static_cast<std::size_t>(set[i])][static_cast<std::size_t>(set[j])];
      }
    }
    return s;
  }
  // How strongly the set is tied to the devices it leaves behind; lower keeps cliques whole.
  long long leak(const std::vector<int>& set) const {
    long long s = 0;
    for (int i : set) {
      for (std::size_t j = 0; j < avail.size(); ++j) {
        if (std::find(set.begin(), set.end(), static_cast<int>(j)) == set.end()) {
          s += score[static_cast<std::size_t>(i)][j];
        }
      }
    }
    return s;
  }
  void consider(const std::vector<int>& set) {
    const long long s = set_score(set);
    const long long l = leak(set);
    if (s > best_score || (s == best_score && l < best_leak)) {
      best_score = s;
      best_leak = l;
      best = set;
    }
  }
  void exhaustive(std::vector<int>& set, std::size_t from, std::size_t size) {
    if (set.size() == size) {
      consider(set);
      return;
    }
    for (std::size_t i = from; i < avail.size(); ++i) {
      if (std::find(set.begin(), set.end(), static_cast<int>(i)) != set.end()) continue;
      set.push_back(static_cast<int>(i));
      exhaustive(set, i + 1, size);
      set.pop_back();
    }
  }
  void greedy(std::vector<int>& set, std::size_t size) {
    while (set.size() < size) {
      int pick = -1;
      long long pick_gain = -1;
      for (std::size_t i = 0; i < avail.size(); ++i) {
        if (std::find(set.begin(), set.end(), static_cast<int>(i)) != set.end()) continue;
        long long gain = 0;
        for (int j : set) gain += score[i][static_cast<std::size_t>(j)];
        if (gain > pick_gain) {
          pick_gain = gain;
          pick = static_cast<int>(i);
        }
      }
      set.push_back(pick);
    }
    consider(set);
  }
};

}  // namespace

int pair_score(const topology::Host& host, const Resource& r, const PhysicalDevice& a,
               const PhysicalDevice& b) {
  (void)r;
  if (a.gpu == b.gpu) return 200;  // MIG devices of one GPU: keep a container on one GPU
  int s = 0;
  if (const auto* l = host.link(static_cast<std::size_t>(a.gpu), static_cast<std::size_t>(b.gpu))) {
    switch (l->path) {
      case Path::kNvLink:
        s = 100 * std::max(1, l->nvlinks);
        break;
      case Path::kXgmi:
        // KFD weights grow with hops (15 inside an MI250 package, 30 across): fewer is better.
        s = l->xgmi_weight > 0 ? std::max(100, 6000 / l->xgmi_weight) : 100;
        break;
      case Path::kPix:
        s = 50;
        break;
      case Path::kPxb:
        s = 40;
        break;
      case Path::kPhb:
        s = 30;
        break;
      case Path::kNode:
        s = 20;
        break;
      case Path::kSys:
      case Path::kSelf:
        s = 10;
        break;
    }
  }
  if (!a.numa_nodes.empty() && a.numa_nodes == b.numa_nodes) s += 5;
  return s;
}

std::vector<std::string> preferred_allocation(const topology::Host& host, const Resource& r,
                                              const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include,
                                              int size) {
  const auto avail = lookup(r, available);
  const auto must = lookup(r, must_include);
  if (size < static_cast<int>(must.size())) {
    throw std::invalid_argument(
        fmt::format("preferred allocation of {} {} cannot include the {} required devices", size,
                    r.name, must.size()));
  }
  if (size > static_cast<int>(avail.size())) {
    throw std::invalid_argument(fmt::format("preferred allocation of {} {}: only {} available",
                                            size, r.name, avail.size()));
  }
  std::vector<std::string> chosen;
  for (const auto& m : must) chosen.push_back(m.id);
  if (r.sharing != SharingKind::kNone) return distributed(host, r, avail, chosen, size);

  SetSearch search{host, r, avail, {}, {}, {}, -1, 0};
  search.score.assign(avail.size(), std::vector<int>(avail.size(), 0));
  for (std::size_t i = 0; i < avail.size(); ++i) {
    for (std::size_t j = 0; j < avail.size(); ++j) {
      if (i != j) search.score[i][j] = pair_score(host, r, *avail[i].dev, *avail[j].dev);
    }
  }
  std::vector<int> set;
  for (const auto& m : must) {
    const auto it =
        std::find_if(avail.begin(), avail.end(), [&](const Candidate& c) { return c.id == m.id; });
    // must_include devices are allocated already and need not be in `available`.
    if (it != avail.end()) set.push_back(static_cast<int>(it - avail.begin()));
  }
  const std::size_t wanted = static_cast<std::size_t>(size) - (must.size() - set.size());
  if (choose(static_cast<long long>(avail.size() - set.size()),
             static_cast<long long>(wanted - set.size())) <= kExhaustiveLimit) {
    search.exhaustive(set, 0, wanted);
  } else {
    search.greedy(set, wanted);
  }
  for (int i : search.best) {
    const std::string& id = avail[static_cast<std::size_t>(i)].id;
    if (std::find(chosen.begin(), chosen.end(), id) == chosen.end()) chosen.push_back(id);
  }
  return chosen;
}

}  // namespace gpuorch::k8s

#include "gpuorch/sched/jobs/queue_tree.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>

namespace gpuorch::sched::jobs {
namespace {

constexpr double kUnbounded = std::numeric_limits<double>::infinity();

std::array<const workload::QueueResource*, kFirstModelSlot> resources_of(
    const workload::QueueSpec& s) {
  return {&s.gpu, &s.cpu, &s.memory};
}

}  // namespace

QueueTree::QueueTree(std::vector<workload::QueueSpec> specs) {
  if (specs.empty()) {
    workload::QueueSpec d;
    d.name = workload::kDefaultQueue;
    specs.push_back(std::move(d));
  }
  for (const auto& s : specs) {
    for (const auto& m : s.gpu_models) {
      if (std::find(models_.begin(), models_.end(), m.model) == models_.end()) {
        models_.push_back(m.model);
      }
    }
  }
  // io::parse_queues refuses more with the file's line.
  if (models_.size() > kGpuModelSlots) throw std::invalid_argument("too many GPU models");
  std::map<std::string, std::size_t> index;
  for (auto& s : specs) {
    index.emplace(s.name, nodes_.size());
    Node n;
    n.spec = std::move(s);
    const auto rs = resources_of(n.spec);
    n.limit.fill(kUnbounded);  // slots of models no queue names bound nothing
    for (std::size_t k = 0; k < kFirstModelSlot; ++k) {
      n.quota[k] = rs[k]->quota == workload::kUnlimited ? 0.0 : double(rs[k]->quota);
      n.limit[k] = rs[k]->limit == workload::kUnlimited ? kUnbounded : double(rs[k]->limit);
      n.weight[k] = rs[k]->over_quota_weight;
    }
    for (std::size_t i = 0; i < models_.size(); ++i) {
      const std::size_t k = kFirstModelSlot + i;
      n.quota[k] = 0;
      n.limit[k] = n.limit[0];
      n.weight[k] = n.weight[0];
    }
    for (const auto& m : n.spec.gpu_models) {
      const std::size_t k = *model_slot(m.model);
      n.listed.push_back(k);
      n.quota[k] = m.gpu.quota == workload::kUnlimited ? 0.0 : double(m.gpu.quota);
      n.limit[k] = m.gpu.limit == workload::kUnlimited ? kUnbounded : double(m.gpu.limit);
      n.weight[k] = m.gpu.over_quota_weight;
    }
    nodes_.push_back(std::move(n));
  }
  for (std::size_t q = 0; q < nodes_.size(); ++q) {
    if (nodes_[q].spec.parent.empty()) {
      roots_.push_back(q);
    } else {
      const std::size_t p = index.at(nodes_[q].spec.parent);
      nodes_[q].parent = static_cast<int>(p);
      nodes_[p].children.push_back(q);
    }
  }
  for (std::size_t q = 0; q < nodes_.size(); ++q) {
    if (nodes_[q].children.empty()) leaves_.push_back(q);
  }
}

std::optional<std::size_t> QueueTree::find(const std::string& name) const {
  for (std::size_t q = 0; q < nodes_.size(); ++q) {
    if (nodes_[q].spec.name == name) return q;
  }
  return std::nullopt;
}

std::optional<std::size_t> QueueTree::model_slot(std::string_view model) const {
  for (std::size_t i = 0; i < models_.size(); ++i) {
    if (models_[i] == model) return kFirstModelSlot + i;
  }
  return std::nullopt;
}

std::vector<Amounts> QueueTree::fair_shares(const std::vector<Amounts>& demand,
                                            const Amounts& capacity) const {
  // What each subtree wants, capped by each queue's limit on the way up.
  std::vector<Amounts> want(nodes_.size(), Amounts{});
  std::vector<std::size_t> post;  // children before parents
  std::vector<std::size_t> stack(roots_.begin(), roots_.end());
  while (!stack.empty()) {
    const std::size_t q = stack.back();
    stack.pop_back();
    post.push_back(q);
    for (const std::size_t c : nodes_[q].children) stack.push_back(c);
  }
  std::reverse(post.begin(), post.end());
  for (const std::size_t q : post) {
    if (leaf(q)) want[q] = demand[q];
    for (std::size_t k = 0; k < kResourceKinds; ++k) {
      want[q][k] = std::min(want[q][k], nodes_[q].limit[k]);
      if (nodes_[q].parent >= 0) want[std::size_t(nodes_[q].parent)][k] += want[q][k];
    }
  }
  std::vector<Amounts> share(nodes_.size(), Amounts{});
  divide(roots_, capacity, want, share);
  return share;
}

void QueueTree::divide(const std::vector<std::size_t>& siblings, const Amounts& capacity,
                       const std::vector<Amounts>& want, std::vector<Amounts>& share) const {
  // Slots of models no queue names stay 0.
  for (std::size_t k = 0; k < kFirstModelSlot + models_.size(); ++k) {
    // Quotas first, up to what each queue wants; scaled down when they overcommit the capacity.
    double given = 0;
    for (const std::size_t q : siblings) {
      share[q][k] = std::min(nodes_[q].quota[k], want[q][k]);
      given += share[q][k];
    }
    if (given > capacity[k] && given > 0) {
      for (const std::size_t q : siblings) share[q][k] *= capacity[k] / given;
      given = capacity[k];
    }
    double left = capacity[k] - given;
    // Then the rest by weight, higher priority first; water-filling, since a queue that wants
    // less than its weighted part hands the difference to the others.
    std::vector<int> priorities;
    for (const std::size_t q : siblings) priorities.push_back(nodes_[q].spec.priority);
    std::sort(priorities.begin(), priorities.end(), std::greater<>());
    priorities.erase(std::unique(priorities.begin(), priorities.end()), priorities.end());
    for (const int level : priorities) {
      std::vector<std::size_t> open;
      for (const std::size_t q : siblings) {
        if (nodes_[q].spec.priority == level && nodes_[q].weight[k] > 0 &&
            share[q][k] < want[q][k]) {
          open.push_back(q);
        }
      }
      while (left > 1e-9 && !open.empty()) {
        double weights = 0;
        for (const std::size_t q : open) weights += nodes_[q].weight[k];
        // The queues whose weighted part covers what they still want are filled and leave.
        std::vector<std::size_t> still;
        double filled = 0;
        for (const std::size_t q : open) {
          const double part = left * nodes_[q].weight[k] / weights;
          if (want[q][k] - share[q][k] <= part) {
            filled += want[q][k] - share[q][k];
            share[q][k] = want[q][k];
          } else {
            still.push_back(q);
          }
        }
        if (still.size() == open.size()) {
          for (const std::size_t q : open) share[q][k] += left * nodes_[q].weight[k] / weights;
          left = 0;
          break;
        }
        left -= filled;
        open = std::move(still);
      }
    }
  }
  for (const std::size_t q : siblings) {
    if (!nodes_[q].children.empty()) divide(nodes_[q].children, share[q], want, share);
  }
}

}  // namespace gpuorch::sched::jobs

#include "gpuorch/sched/expected_fill.hpp"

#include <algorithm>

#include "gpuorch/base/units.hpp"
#include "gpuorch/sched/pod_request.hpp"

namespace gpuorch::sched {
std::vector<ShapeClass> resolve_classes(const workload::TargetWorkload& target,
                                        const cluster::Cluster& cluster) {
  std::vector<ShapeClass> out;
  out.reserve(target.classes.size());
  for (const auto& c : target.classes) {
    const bool cpu_only = c.gpu_count == 0 || c.gpu_milli == 0;
    out.push_back(ShapeClass{c.cpu_milli, cpu_only ? 0 : static_cast<std::int32_t>(c.gpu_milli),
                             cpu_only ? 0 : c.gpu_count,
                             cpu_only ? 0 : model_mask(cluster, c.allowed_models), c.memory_mib,
                             c.weight});
  }
  return out;
}

ExpectedFill::ExpectedFill(std::vector<ShapeClass> classes, std::size_t model_count,
                           ExpectedFillParams params)
    : classes_(std::move(classes)), params_(params), fill_(model_count * kSteps) {
  add_programme(classes_, model_count, 1.0);
  index_classes(model_count);
}

ExpectedFill::ExpectedFill(const std::vector<std::vector<ShapeClass>>& targets,
                           std::size_t model_count, ExpectedFillParams params)
    : params_(params), fill_(model_count * kSteps) {
  if (targets.empty()) return;
  const double share = 1.0 / static_cast<double>(targets.size());
  for (const auto& classes : targets) {
    add_programme(classes, model_count, share);
    // The classes behind the CPU competition and the multi-GPU term, each weighed by its mean
    // weight over the targets.
    for (const ShapeClass& c : classes) {
      auto same = [&](const ShapeClass& o) {
        return o.cpu_milli == c.cpu_milli && o.gpu_milli == c.gpu_milli &&
               o.gpu_count == c.gpu_count && o.model_mask == c.model_mask &&
               o.memory_mib == c.memory_mib;
      };
      const auto it = std::find_if(classes_.begin(), classes_.end(), same);
      if (it == classes_.end()) {
        classes_.push_back(c);
        classes_.back().weight = c.weight * share;
      } else {
        it->weight += c.weight * share;
      }
    }
  }
  index_classes(model_count);
}

void ExpectedFill::index_classes(std::size_t model_count) {
  // Each sum adds the classes in the order effective_cpu always did, so the result is the same
  // to the last bit.
  for (const ShapeClass& c : classes_) {
    if (c.gpu_count >= 2) multi_.push_back(c);
    if (c.gpu_milli == 0) cpu_only_asks_.push_back(c.cpu_milli);
  }
  std::sort(cpu_only_asks_.begin(), cpu_only_asks_.end());
  cpu_only_asks_.erase(std::unique(cpu_only_asks_.begin(), cpu_only_asks_.end()),
                       cpu_only_asks_.end());
  for (const std::int64_t ask : cpu_only_asks_) {
    double sum = 0;
    for (const ShapeClass& c : classes_) {
      if (c.gpu_milli == 0 && c.cpu_milli <= ask)
        sum += c.weight * static_cast<double>(c.cpu_milli);
    }
    cpu_only_upto_.push_back(sum);
  }
  gpu_pod_cpu_.assign(model_count, 0.0);
  for (std::size_t m = 0; m < model_count; ++m) {
    for (const ShapeClass& c : classes_) {
      if (c.gpu_milli != 0 && mask_allows(c.model_mask, static_cast<cluster::ModelId>(m))) {
        gpu_pod_cpu_[m] += c.weight * static_cast<double>(c.cpu_milli);
      }
    }
  }
}

void ExpectedFill::add_programme(const std::vector<ShapeClass>& classes, std::size_t model_count,
                                 double share) {
  std::vector<Fill> f(kSteps);
  for (std::size_t m = 0; m < model_count; ++m) {
    const auto model = static_cast<cluster::ModelId>(m);
    std::fill(f.begin(), f.end(), Fill{});
    for (std::int32_t r = 1; r <= base::kMilliPerGpu; ++r) {
      double mass = 0;
      Fill sum;
      for (const ShapeClass& c : classes) {
        if (c.gpu_milli == 0 || c.gpu_milli > r || !mask_allows(c.model_mask, model)) continue;
        const Fill& rest = f[static_cast<std::size_t>(r - c.gpu_milli)];
        mass += c.weight;
        sum.gpu += c.weight * (c.gpu_milli + rest.gpu);
        // A k-GPU pod's CPU and memory are shared by its k GPUs.
        sum.cpu += c.weight * (static_cast<double>(c.cpu_milli) / c.gpu_count + rest.cpu);
        sum.memory += c.weight * (c.memory_mib / c.gpu_count + rest.memory);
        sum.head_gpu += c.weight * c.gpu_milli;
        sum.head_cpu += c.weight * static_cast<double>(c.cpu_milli) / c.gpu_count;
        sum.head_memory += c.weight * c.memory_mib / c.gpu_count;
      }
      if (mass > 0) {
        f[static_cast<std::size_t>(r)] =
            Fill{sum.gpu / mass,      sum.cpu / mass,      sum.memory / mass,
                 sum.head_gpu / mass, sum.head_cpu / mass, sum.head_memory / mass};
      }
    }
    Fill* out = fill_.data() + m * kSteps;
    for (std::size_t r = 0; r < kSteps; ++r) out[r].add(f[r], share);
  }
}

double ExpectedFill::effective_cpu(cluster::ModelId model, std::int64_t cpu_free) const {
  const auto cpu = static_cast<double>(cpu_free);
  if (params_.cpu_competition <= 0 || model < 0 ||
      static_cast<std::size_t>(model) >= gpu_pod_cpu_.size()) {
    return cpu;
  }
  // The CPU-only classes that fit in cpu_free: those asking at most the largest ask <= it.
  const auto fitting = std::upper_bound(cpu_only_asks_.begin(), cpu_only_asks_.end(), cpu_free);
  const double cpu_only =
      fitting == cpu_only_asks_.begin()
          ? 0.0
          : cpu_only_upto_[static_cast<std::size_t>(fitting - cpu_only_asks_.begin()) - 1];
  const double gpu_pods = gpu_pod_cpu_[static_cast<std::size_t>(model)];
  if (cpu_only + gpu_pods <= 0) return cpu;
  return cpu * std::max(0.0, 1.0 - params_.cpu_competition * cpu_only / (cpu_only + gpu_pods));
}

double ExpectedFill::stranded(cluster::ModelId model, std::int64_t cpu_free,
                              std::int64_t memory_free,
                              std::span<const std::int32_t> gpu_left) const {
  std::int64_t idle = 0;
  Fill total;
  int fully_free = 0;
  for (const std::int32_t left : gpu_left) {
    idle += left;
    fully_free += left == base::kMilliPerGpu ? 1 : 0;
    if (model < 0) continue;
    total.add(fill(model, left));
  }
  if (idle == 0) return 0.0;
  // The pods that would fill the GPUs need CPU and memory too; the node's free CPU and memory
  // feed only part of the fill when they are less.
  double filled = total.gpu;
  if (params_.feed_limit) {
    const double cpu = effective_cpu(model, cpu_free);
    const auto memory = static_cast<double>(memory_free);
    if (params_.feed_tail) {
      // The milli a resource can feed: every first pod before any later one.
      auto fed = [&](double have, double head_need, double need) {
        if (have >= need) return total.gpu;
        if (have >= head_need) {
          return total.head_gpu +
                 (total.gpu - total.head_gpu) * (have - head_need) / (need - head_need);
        }
        return head_need > 0 ? total.head_gpu * have / head_need : total.head_gpu;
      };
      filled = std::min(fed(cpu, total.head_cpu, total.cpu),
                        fed(memory, total.head_memory, total.memory));
    } else {
      // The same share of every pod.
      double share = 1.0;
      if (total.cpu > cpu) share = std::min(share, cpu / total.cpu);
      if (total.memory > memory) share = std::min(share, memory / total.memory);
      filled = total.gpu * share;
    }
  }
  double stranded = static_cast<double>(idle) - filled;
  for (const ShapeClass& c : multi_) {
    if (!mask_allows(c.model_mask, model) || static_cast<int>(gpu_left.size()) < c.gpu_count)
      continue;
    if (fully_free >= c.gpu_count && cpu_free >= c.cpu_milli) continue;
    stranded += params_.multi_gpu_weight * c.weight * static_cast<double>(idle);
  }
  return stranded;
}

}  // namespace gpuorch::sched

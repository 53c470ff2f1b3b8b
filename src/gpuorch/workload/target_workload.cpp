#include "gpuorch/workload/target_workload.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace gpuorch::workload {

TargetWorkload typical_pods(std::span<const PodSpec> history, double popularity) {
  using Key = std::tuple<std::int64_t, std::int64_t, int, std::string>;
  std::map<Key, std::int64_t> counts;
  std::map<Key, std::vector<std::string>> models;
  std::map<Key, double> memory;
  for (const PodSpec& pod : history) {
    Key key{pod.cpu_milli, pod.cpu_only() ? 0 : pod.gpu_milli, pod.gpu_count,
            join_models(pod.allowed_models)};
    if (++counts[key] == 1) models[key] = pod.allowed_models;
    memory[key] += static_cast<double>(pod.memory_mib);
  }
  std::vector<std::pair<Key, std::int64_t>> ranked(counts.begin(), counts.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first > b.first;
  });
  const auto total = static_cast<double>(history.size());
  // The study's threshold is percent * all / 100 (e.g. 95 * 9420 / 100 = 8949 exactly).
  const double threshold = popularity * 100.0 * total / 100.0;
  TargetWorkload target;
  std::int64_t kept = 0;
  for (const auto& [key, count] : ranked) {
    if (static_cast<double>(kept) >= threshold) break;
    kept += count;
    TaskClass c;
    c.cpu_milli = std::get<0>(key);
    c.gpu_milli = std::get<1>(key);
    c.gpu_count = std::get<2>(key);
    c.allowed_models = models[key];
    c.count = count;
    c.memory_mib = memory[key] / static_cast<double>(count);
    target.classes.push_back(std::move(c));
  }
  // p_m = count / kept, computed as the study does ((count / all) / (kept / all), and no
  // renormalisation when every key is kept) so the weights, and with them the fragmentation
  // amounts that FGD compares, are the same doubles.
  const bool all_kept = target.classes.size() == ranked.size();
  for (TaskClass& c : target.classes) {
    c.weight = static_cast<double>(c.count) / total;
    if (!all_kept) c.weight /= static_cast<double>(kept) / total;
  }
  return target;
}

TargetWorkload most_popular(const TargetWorkload& all, double popularity) {
  std::vector<const TaskClass*> ranked;
  std::int64_t total = 0;
  for (const TaskClass& c : all.classes) {
    ranked.push_back(&c);
    total += c.count;
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const TaskClass* a, const TaskClass* b) { return a->count > b->count; });
  TargetWorkload out;
  std::int64_t kept = 0;
  for (const TaskClass* c : ranked) {
    if (static_cast<double>(kept) >= popularity * static_cast<double>(total)) break;
    kept += c->count;
    out.classes.push_back(*c);
  }
  for (TaskClass& c : out.classes) {
    c.weight = static_cast<double>(c.count) / static_cast<double>(kept);
  }
  return out;
}

}  // namespace gpuorch::workload

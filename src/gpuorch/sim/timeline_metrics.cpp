#include "gpuorch/sim/timeline_metrics.hpp"

#include <algorithm>
#include <cmath>

namespace gpuorch::sim {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * double(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

TimelineSummary summarize(const TimelineResult& r) {
  TimelineSummary s;
  s.jobs = r.jobs.size();
  std::vector<double> jct;
  double queue = 0, held = 0, useful = 0;
  std::size_t started = 0;
  for (const auto& j : r.jobs) {
    held += j.gpu_seconds;
    useful += j.useful_gpu_seconds;
    if (j.start >= 0) {
      queue += double(j.start - j.submit);
      ++started;
    }
    if (j.completion < 0) continue;
    jct.push_back(double(j.completion - j.submit));
    s.makespan_s = std::max(s.makespan_s, double(j.completion));
  }
  s.finished = jct.size();
  if (!jct.empty()) {
    double sum = 0;
    for (const double x : jct) sum += x;
    s.avg_jct_s = sum / double(jct.size());
  }
  s.median_jct_s = percentile(jct, 50);
  s.p99_jct_s = percentile(jct, 99);
  s.avg_queue_s = started > 0 ? queue / double(started) : 0;
  s.gpu_hours = held / 3600.0;
  const double capacity = double(r.total_gpus) * s.makespan_s;
  if (capacity > 0) {
    s.utilisation = held / capacity;
    s.goodput_utilisation = useful / capacity;
  }
  return s;
}

std::vector<QueueSummary> summarize_queues(const TimelineResult& r) {
  std::vector<std::string> names = r.queues;
  for (const auto& j : r.jobs) names.push_back(j.queue);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<QueueSummary> out(names.size());
  std::vector<double> jct(names.size()), wait(names.size());
  std::vector<std::size_t> started(names.size());
  double held = 0;
  for (const auto& j : r.jobs) {
    const auto q = static_cast<std::size_t>(std::lower_bound(names.begin(), names.end(), j.queue) -
                                            names.begin());
    ++out[q].jobs;
    out[q].gpu_hours += j.gpu_seconds;
    held += j.gpu_seconds;
    if (j.start >= 0) {
      wait[q] += double(j.start - j.submit);
      ++started[q];
    }
    if (j.completion >= 0) {
      jct[q] += double(j.completion - j.submit);
      ++out[q].finished;
    }
  }
  for (std::size_t q = 0; q < out.size(); ++q) {
    out[q].queue = names[q];
    if (out[q].finished > 0) out[q].avg_jct_s = jct[q] / double(out[q].finished);
    if (started[q] > 0) out[q].avg_wait_s = wait[q] / double(started[q]);
    if (held > 0) out[q].gpu_share = out[q].gpu_hours / held;
    out[q].gpu_hours /= 3600.0;
  }
  return out;
}

}  // namespace gpuorch::sim

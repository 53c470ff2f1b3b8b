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

}  // namespace gpuorch::sim

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

namespace {

// From the samples: each holds its allocation until the next one.
void window_utilisation(const TimelineResult& r, TimelineSummary& s) {
  if (r.jobs.empty() || r.total_gpus <= 0) return;
  Seconds first = r.jobs.front().submit, last = first;
  for (const auto& j : r.jobs) {
    first = std::min(first, j.submit);
    last = std::max(last, j.submit);
  }
  double arrivals = 0, waiting = 0, waiting_time = 0;
  for (std::size_t i = 0; i + 1 < r.samples.size(); ++i) {
    const Seconds from = r.samples[i].time, to = r.samples[i + 1].time;
    const double gpus = r.samples[i].allocated_gpus;
    const Seconds lo = std::max(from, first), hi = std::min(to, last);
    if (hi > lo) arrivals += gpus * double(hi - lo);
    if (r.samples[i].queued > 0) {
      waiting += gpus * double(to - from);
      waiting_time += double(to - from);
    }
  }
  const double gpus = r.total_gpus;
  if (last > first) s.utilisation_arrivals = arrivals / (gpus * double(last - first));
  if (waiting_time > 0) s.utilisation_waiting = waiting / (gpus * waiting_time);
}

}  // namespace

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
  window_utilisation(r, s);
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

#pragma once
// The HTML report of `sim timeline` runs: per policy (and cluster size) the JCT CDF, the cluster's
// utilisation over time (allocated, and weighted by statistical efficiency), the queue length
// over time, and the summary table, plotted by gnuplot.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "gpuorch/report/html_page.hpp"
#include "gpuorch/sim/timeline_engine.hpp"

namespace gpuorch::report {

// GPUs guaranteed per queue (a queue file's gpu quota); a queue not in it has none known.
using QueueQuotas = std::map<std::string, double>;

struct TimelineMeta {
  std::string workload;  // the workload file
  std::size_t jobs = 0;
  sim::Seconds interval = 60;
  QueueQuotas quota_gpus;  // drawn dashed on the per-queue plot when known
};

// Most points a curve gets in the data files: a whole Philly trace has 10^5 jobs and ticks, far
// more than a plot 900 pixels wide shows.
inline constexpr std::size_t kMaxCurvePoints = 1000;

// jct_cdf.dat: one block per result (`# label`, then `jct_h fraction`): the fraction of the
// workload's jobs finished within jct_h hours of submission, at every finished job (evenly spaced
// ranks beyond kMaxCurvePoints).
std::string timeline_cdf_data(const std::vector<sim::TimelineResult>& results);

// series.dat: one block per result (`# label`, then `time_h allocated goodput queued`): allocated
// and goodput-weighted GPUs as fractions of the cluster and the jobs waiting, as steps (each
// sample's value again just before the next sample), so idle gaps show as zero, not as slopes.
// Beyond kMaxCurvePoints samples, consecutive ones are merged into their time-weighted mean.
std::string timeline_series_data(const std::vector<sim::TimelineResult>& results);

// The gnuplot script drawing jct_cdf.svg, utilisation.svg, goodput.svg and queue.svg.
std::string timeline_plot_script(const std::vector<sim::TimelineResult>& results);

// Every queue of the results, sorted by name.
std::vector<std::string> timeline_queues(const std::vector<sim::TimelineResult>& results);

// The report has a per-queue section when there are tenants to compare (several queues) or
// quotas to draw.
bool shows_queues(const std::vector<sim::TimelineResult>& results, const QueueQuotas& quotas);

// queue_gpus.dat: a first line `# time_h` and the queue names (the columns' order: the
// timeline_queues), then one block per result (`# label`, then `time_h gpus_q1 gpus_q2 ...`): the
// GPUs each queue holds, as steps merged like series.dat's.
std::string timeline_queue_data(const std::vector<sim::TimelineResult>& results);

// The gnuplot lines drawing queue_gpus.svg: one panel per queue with every result's curve and,
// where `quotas` knows the queue, its quota as a dashed line. Appended to timeline_plot_script's.
std::string timeline_queue_plot_script(const std::vector<sim::TimelineResult>& results,
                                       const QueueQuotas& quotas);

// Writes DIR/index.html with the plots, the data and the script; the folder appears complete or
// not at all.
void write_timeline_html(const std::string& dir, const TimelineMeta& meta, const RunHeader& header,
                         const std::vector<sim::TimelineResult>& results);

}  // namespace gpuorch::report

#pragma once
// Pollux's throughput model and its fit to a job's observed step times (timeline-protocol.md
// §8.1, §8.4). Compute time per micro-batch a is alpha_c + beta_c a; the gradient exchange takes
// alpha + beta (R - 2) across nodes (_n) or between the GPUs of one node (_r); the last
// micro-step overlaps them as (t_c^gamma + t_n^gamma)^(1/gamma).
#include <span>

#include "gpuorch/sched/jobs/speedup_model.hpp"

namespace gpuorch::sched::jobs {

struct ThroughputParams {
  double alpha_c = 0.1;
  double beta_c = 0.01;
  double alpha_n = 0.1;
  double beta_n = 0.01;
  double alpha_r = 0.1;
  double beta_r = 0.01;
  double gamma = 1.001;
};

// Compute time of one micro-batch of `local` samples per GPU.
double compute_time(const ThroughputParams& p, double local);
// One step without accumulation, synchronisation overlapped (t_o).
double sync_step_time(const ThroughputParams& p, int nodes, int replicas, double local);
// One optimizer step with `accum` extra micro-batches: accum t_c + t_o.
double step_time(const ThroughputParams& p, int nodes, int replicas, double local, int accum);

// The artifact's fit: log-space RMSE of compute and step time plus its regularisers, minimised
// under its bounds and pinning rules (NLopt SLSQP on the exact gradient) from its fixed start,
// so the same samples give the same parameters. `samples` holds one entry per distinct
// (nodes, replicas, local batch); empty gives the start values.
ThroughputParams fit_throughput(std::span<const ThroughputSample> samples);

// The fit's objective at `p` (exposed for tests: a fit is never worse than its start).
double fit_loss(const ThroughputParams& p, std::span<const ThroughputSample> samples);

}  // namespace gpuorch::sched::jobs

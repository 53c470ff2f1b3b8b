#include "gpuorch/sim/timeline_throughput.hpp"

#include <fmt/format.h>

#include <cassert>

#include "gpuorch/sim/timeline_profile.hpp"

namespace gpuorch::sim {

std::string simulated_rfc3339(Seconds at) {
  // Civil date from days since the epoch (Howard Hinnant's days_from_civil, inverted).
  const Seconds days = at / 86400;
  const Seconds rest = at % 86400;
  const Seconds z = days + 719468;
  const Seconds era = z / 146097;
  const Seconds doe = z - era * 146097;
  const Seconds yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const Seconds doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const Seconds mp = (5 * doy + 2) / 153;
  const Seconds day = doy - (153 * mp + 2) / 5 + 1;
  const Seconds month = mp < 10 ? mp + 3 : mp - 9;
  const Seconds year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z", year, month, day, rest / 3600,
                     rest / 60 % 60, rest % 60);
}

workload::ThroughputReport published_throughput(const Job& job, Seconds at) {
  assert(job.app() != nullptr && job.gpus() > 0);
  const std::vector<int> where = job.gpus_per_node();
  const BatchConfig& b = job.batch();
  const StepTime t = job.app()->throughput(where, b.local);
  workload::ThroughputReport r;
  r.world_size = job.gpus();
  r.nodes = job.gpus();  // one pod per replica: the scheduler counts launch agents
  r.local_batch = b.local;
  r.step_time = t.step;
  r.sync_time = t.sync;
  r.samples_per_second = t.step > 0 ? double(r.world_size) * b.local / t.step : 0.0;
  r.time = simulated_rfc3339(at);
  return r;
}

}  // namespace gpuorch::sim

#include "gpuorch/sched/jobs/speedup_model.hpp"

namespace gpuorch::sched::jobs {

double speedup(SpeedupModel& model, int gpus, int nodes, int base_gpus, int base_nodes) {
  if (gpus <= 0) return 0;
  if (!model.known()) return double(gpus) / base_gpus;
  const double base = model.goodput(base_gpus, base_nodes);
  return base > 0 ? model.goodput(gpus, nodes) / base : 0.0;
}

int packed_nodes(int gpus, int per_node) { return (gpus + per_node - 1) / per_node; }

std::optional<SpeedupSource> parse_speedup_source(const std::string& name) {
  if (name == "oracle") return SpeedupSource::kOracle;
  if (name == "fitted") return SpeedupSource::kFitted;
  return std::nullopt;
}

const char* speedup_source_name(SpeedupSource source) {
  return source == SpeedupSource::kOracle ? "oracle" : "fitted";
}

}  // namespace gpuorch::sched::jobs

#pragma once
// What a scheduler knows about how fast a training job goes on more GPUs: its goodput (training
// progress per second) at a GPU and node count, with the best batch the job may use. Two kinds:
// the oracle, read from the measured application profiles (sim/timeline_goodput.hpp), and the model
// fitted online to what the job has run (fitted_speedup.hpp, the Pollux artifact's,
// timeline-protocol.md §8). The inputs are the job's own reports, so the job layer can hold one
// model per job without the simulator: the configurations it ran and their step times, and the
// gradient statistics at its current batch.
#include <cstdint>
#include <optional>
#include <string>

namespace gpuorch::sched::jobs {

// One configuration a job has run and how long its optimizer step took there.
struct ThroughputSample {
  int nodes = 1;     // distinct nodes the replicas were on
  int replicas = 1;  // GPUs (one replica per GPU)
  int local_batch = 1;
  double step_time = 0;  // s: one step without accumulation, synchronisation included
  double sync_time = 0;  // s: the synchronisation part of it
};

// The gradient statistics a job measures while it trains (the artifact's `grad_params`): the
// squared norm of the expected gradient and the gradient variance at the initial batch.
struct GradientStats {
  double sqr = 0;
  double var = 0;
  bool operator==(const GradientStats&) const = default;
};

// The batch sizes a job may use: the application's constants, and a fixed global batch (> 0)
// when the job does not tune its batch.
struct BatchRange {
  int init_batch = 1;
  int max_batch = 1;
  int min_local = 1;
  int max_local = 1;
  int fixed_batch = 0;
};

class SpeedupModel {
 public:
  virtual ~SpeedupModel() = default;
  // Whether the model has anything to go on; before that callers use the prior, a linear
  // speedup (the artifact's `speedup(n, R) = R` for a job never run, §8.5).
  [[nodiscard]] virtual bool known() const = 0;
  // Progress per second, in optimizer steps at the initial batch, with `gpus` GPUs on `nodes`
  // nodes at the job's best batch there; 0 without GPUs.
  virtual double goodput(int gpus, int nodes) = 0;
  // What the job reports as it runs; a model read from profiles needs neither.
  virtual void observe(const ThroughputSample& /*sample*/) {}
  virtual void observe(const GradientStats& /*stats*/) {}
  // Whether goodput(gpus, nodes) rests on a step time measured there rather than extrapolated.
  [[nodiscard]] virtual bool measured(int /*gpus*/, int /*nodes*/) const { return false; }
  // The most GPUs a step time was measured on (by the job or, when shared, another); 0: none.
  [[nodiscard]] virtual int largest_measured() const { return 0; }
};

// goodput(gpus, nodes) / goodput(base_gpus, base_nodes), or gpus / base_gpus while the model
// knows nothing (the prior). 0 for no GPUs.
double speedup(SpeedupModel& model, int gpus, int nodes, int base_gpus, int base_nodes);

// Which model the elastic policies see (`--speedup-model`).
enum class SpeedupSource : std::uint8_t { kOracle, kFitted };
// "oracle" or "fitted"; nullopt otherwise.
std::optional<SpeedupSource> parse_speedup_source(const std::string& name);
const char* speedup_source_name(SpeedupSource source);

// The fewest nodes of `per_node` GPUs that hold `gpus` (the packed placement's node count).
int packed_nodes(int gpus, int per_node);

}  // namespace gpuorch::sched::jobs

#pragma once
// What a running training job measured about its own speed. The training script writes a step
// report (a JSON line, GPUORCH_THROUGHPUT_FILE; docs/launch.md "Environment contract"),
// `gpuorch launch` turns the latest into a throughput report for the job's size and publishes it
// on the pod of the job's first rank (annotation gpuorch.io/throughput), and
// `gpuorch scheduler --queues` reads it back to fit the job's throughput model
// (docs/scheduler.md "Speed learned from the running job"). Field names follow Pollux's adaptdl
// (`local_bsz`, `optim_step_time`, `optim_sync_time`), which measures the same quantities.
#include <optional>
#include <string>
#include <string_view>

namespace gpuorch::workload {

inline constexpr const char* kThroughputAnnotation = "gpuorch.io/throughput";
// The worker environment variable naming the file the training script appends step reports to.
inline constexpr const char* kThroughputFileEnv = "GPUORCH_THROUGHPUT_FILE";

// One line of the training script: {"local_bsz": 32, "optim_step_time": 0.25} and optionally
// "optim_sync_time" (s of the step spent in the gradient exchange).
struct StepReport {
  int local_bsz = 1;           // samples per rank per optimizer step
  double optim_step_time = 0;  // s per optimizer step, synchronisation included
  double optim_sync_time = 0;  // s of it synchronising; 0: not measured
  bool operator==(const StepReport&) const = default;
};

// A step report at the size the job ran: what the annotation holds.
struct ThroughputReport {
  int world_size = 1;   // ranks (GPUs) of the round
  int nodes = 1;        // launch agents (pods) of the round
  int local_batch = 1;  // samples per rank per step
  double samples_per_second = 0;
  double step_time = 0;  // s
  double sync_time = 0;  // s; 0: not measured
  std::string time;      // RFC 3339: when the launcher read the measurement
};

// The report at a round's size: samples/s = world_size x local_bsz / optim_step_time.
ThroughputReport throughput_at(const StepReport& step, int world_size, int nodes, std::string time);

// Compact JSON: {"worldSize":4,"nodes":2,"localBatch":32,"samplesPerSecond":512,
// "stepTime":0.25,"syncTime":0,"time":"2026-12-04T16:00:00Z"}.
std::string to_annotation(const ThroughputReport& report);

// Never throws: anything that is not one well-formed object within range (a line over 4 KiB,
// a missing or non-numeric field, a time of 0, NaN, more nodes than ranks, ...) is nullopt, and
// `why` (when given) says what was wrong.
std::optional<StepReport> parse_step_report(std::string_view line, std::string* why = nullptr);
std::optional<ThroughputReport> parse_throughput_annotation(std::string_view text,
                                                            std::string* why = nullptr);

}  // namespace gpuorch::workload

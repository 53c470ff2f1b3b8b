#pragma once
// The time-based simulation: jobs arrive, wait, run as gangs of replicas, are resized or
// preempted, and finish. Event-driven: the clock jumps from event to event (an arrival wakes the
// scheduler at the next scheduling tick; ticks happen only while some job is active; inside a
// tick each running job advances in closed form from its restart-penalty end to its epoch
// boundaries and its completion, timeline-protocol.md §7), never in small fixed steps.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpuorch/cluster/node_spec.hpp"
#include "gpuorch/sim/timeline_job.hpp"
#include "gpuorch/sim/timeline_model_use.hpp"
#include "gpuorch/sim/timeline_policy.hpp"
#include "gpuorch/sim/timeline_profile.hpp"

namespace gpuorch::sim {

struct TimelineOptions {
  Seconds interval = 60;  // scheduling interval (the artifact's default)
  // Called after each tick with the jobs finished so far (the CLI's progress bar).
  std::function<void(std::size_t done, std::size_t total)> on_progress;
  // Keep every job's arrivals, starts, resizes, preemptions and finishes (TimelineResult::events,
  // `sim timeline --events`).
  bool record_events = false;
};

// What happened to one job at one tick. A tick's events come in this order: the arrivals, the
// finishes (GPUs handed back at the tick), the reports the policy's jobs published, then its
// starts, resizes and preemptions.
struct TimelineEvent {
  // kReport: what the job's launcher publishes at the tick (gpuorch.io/throughput), before the
  // tick's decisions (fifo:per-job:elastic's gangs; `report`).
  enum class Kind : std::uint8_t { kArrive, kStart, kResize, kPreempt, kFinish, kReport };
  Seconds time = 0;  // the tick (decisions are made at ticks; an arrival is seen at the next)
  Kind kind = Kind::kArrive;
  std::size_t job = 0;                // index in TimelineResult::jobs (workload order)
  int replicas = 0;                   // replicas it runs on after the event (0: none)
  int gpus = 0;                       // GPUs it holds after the event
  workload::ThroughputReport report;  // kReport only
};
const char* event_key(TimelineEvent::Kind kind);  // "arrive", "start", ...

struct JobOutcome {
  std::string name;
  std::string queue;  // the job's leaf queue (Philly: its virtual cluster)
  Seconds submit = 0;
  Seconds start = -1;             // first tick with GPUs
  Seconds completion = -1;        // -1: did not finish
  double gpu_seconds = 0;         // GPUs held, restart delays included
  double useful_gpu_seconds = 0;  // weighted by statistical efficiency
  int restarts = 0;
};

// The cluster at one scheduling tick, after the policy's decision; it holds until the next
// sample. An idle cluster (no active job) is one sample of zeros.
struct TimelineSample {
  Seconds time = 0;
  int allocated_gpus = 0;
  int running = 0;
  int queued = 0;  // active without GPUs
  // Allocated GPUs weighted by statistical efficiency, averaged over the time until the next
  // tick (a GPU in its restart delay counts 0): what the allocation was worth in training.
  double goodput_gpus = 0;
  // Allocated GPUs per queue, indexed like TimelineResult::queues (the per-queue share plot).
  std::vector<int> gpus_by_queue;
};

struct TimelineResult {
  std::string policy;
  int total_gpus = 0;
  std::vector<std::string> queues;      // the workload's queues, sorted by name
  std::vector<JobOutcome> jobs;         // in workload order
  std::vector<TimelineSample> samples;  // one per tick with active jobs or turning idle
  std::vector<TimelineEvent> events;    // with TimelineOptions::record_events, in time order
  std::size_t ticks = 0;
  // On a cluster of several GPU models: its models, and by queue (like `queues`) then model,
  // what the queue's jobs held of each (timeline_model_use.hpp); empty otherwise.
  std::vector<std::string> gpu_models;
  std::vector<std::vector<ModelUse>> model_use;
};

// Throws std::runtime_error when the policy leaves every active job without GPUs on an idle
// cluster with no arrival to come (a job that can never run).
TimelineResult run_timeline(const std::vector<JobSpec>& jobs, const AppTable& apps,
                            const std::vector<cluster::NodeSpec>& nodes, TimelinePolicy& policy,
                            const std::string& policy_name, const TimelineOptions& options);

// Nodes of the artifact's kind: `count` nodes of `gpus` GPUs, no other resource modelled.
std::vector<cluster::NodeSpec> uniform_nodes(int count, int gpus);

}  // namespace gpuorch::sim

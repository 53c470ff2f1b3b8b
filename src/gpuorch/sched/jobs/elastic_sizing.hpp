#pragma once
// How many replicas each elastic job should run: the policy values every replica count of every
// job (Pollux's speedup over a fair share, lasgo's service-weighted goodput, Optimus's time
// saved), and the job layer spends the cluster's GPUs on the best value gains per added GPU, one
// queue's fair share at a time. Each leaf queue first spends its share (the queue tree's division
// of the GPUs by what its jobs could use: quota, then over-quota weight), so a tenant's jobs never
// take what another tenant is guaranteed; then whatever the queues leave goes to the best gains
// anywhere (what nobody within its share wants), never past a queue's limit. Higher priorities
// are sized first at each step. The counts become the jobs' JobState::wanted,
// and the round resizes, starts and grows the jobs to them.
#include <cstddef>
#include <span>
#include <vector>

#include "gpuorch/sched/jobs/queue_tree.hpp"

namespace gpuorch::sched::jobs {

struct ElasticDemand {
  std::size_t queue = 0;  // a leaf of the tree
  double gpus_per_replica = 1;
  // CPU and memory of one replica; they count where the capacity has them (below).
  double cpu_milli_per_replica = 0;
  double memory_mib_per_replica = 0;
  // The policy's value of running r replicas, r = 0 .. the most it may run (at least value[0]).
  std::vector<double> value;
  int min = 0;  // replicas it needs to run at all (a gang of min); 0 or 1 for most elastic jobs
  int priority = 0;  // higher: sized first, within its queue's share and then over it
  // Replicas it keeps whatever the values: a running job that may not be preempted holds what it
  // runs (counted first against its queue's share).
  int keep = 0;
  // GPU models (QueueTree::gpu_models, when a queue names one): the Resources slots its replicas
  // may run on, in the order it tries them (job_layer.hpp's model_order: a running job's model
  // alone or first; a waiting one's queue's gpuModels order first). All its replicas land on one;
  // its GPUs count there too, against the queue's share and limit of that model. A slot outside
  // kFirstModelSlot .. kResourceKinds (a model no queue names) counts in `gpu` only. Empty: no
  // model slot (no queue names a model).
  std::vector<std::size_t> models;
};

struct SizingOptions {
  // Optimus's rule: every job first gets its minimum, in the given order, before any job grows;
  // a job that did not get it is not grown.
  bool min_first = false;
  // Grow one replica at a time by its own gain (Optimus); otherwise a step may jump to the count
  // with the best average gain per GPU (a job whose speedup needs a whole node to show).
  bool single_steps = false;
};

// Per demand: its replica count and, where it has `models`, the slot its replicas go on (the
// first it tries when sized to 0).
struct Sized {
  std::vector<int> counts;
  std::vector<std::size_t> models;
};

// Replica counts, one per demand, spending at most `gpus` GPUs in all.
std::vector<int> size_by_value(const QueueTree& tree, double gpus,
                               std::span<const ElasticDemand> demands,
                               const SizingOptions& options = {});

// The same over several resources (the queue tree's units: GPU milli, CPU milli, memory MiB; a
// kind whose capacity is 0 or less is not counted, as a simulator's nodes without CPU figures).
// No kind is spent past the cluster's capacity or a queue's share and limit of it, and a step's
// cost is its dominant share (DRF) expressed in GPUs, so jobs whose replicas need much CPU or
// memory pay for it; with GPUs alone it is the GPU count, as above.
std::vector<int> size_by_value(const QueueTree& tree, const Amounts& capacity,
                               std::span<const ElasticDemand> demands,
                               const SizingOptions& options = {});

// The same, with each model a kind of its own (`capacity`'s model slots: the cluster's GPUs of
// each model, JobLayer::cluster_capacity): a queue's share of a model (its quota, as far as its
// jobs want it, then what nobody within quota wants, by its overQuotaWeight for that model) is
// spent first, in the order of its jobs' models, and a queue below its share of a model gets it
// back at the next sizing, since its borrowers are sized on what is left. A job that may take
// several models takes the first of them where its smallest step fits (within the shares, then
// within the limits): Kueue's flavor assignment with whenCanBorrow: TryNextFlavor.
Sized size_by_value_per_model(const QueueTree& tree, const Amounts& capacity,
                              std::span<const ElasticDemand> demands,
                              const SizingOptions& options = {});

}  // namespace gpuorch::sched::jobs

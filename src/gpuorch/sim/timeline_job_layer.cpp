#include "gpuorch/sim/timeline_job_layer.hpp"

#include <algorithm>

#include "gpuorch/sched/jobs/core_placer.hpp"

namespace gpuorch::sim {

using sched::jobs::JobState;

JobLayerRun::JobLayerRun(std::vector<workload::QueueSpec> queues, std::string placement)
    : default_queue_(queues.empty()),
      tree_(std::move(queues)),
      placement_name_(std::move(placement)) {
  sched::check_policy_spec(placement_name_);
}

void JobLayerRun::start(cluster::Cluster& cluster) {
  cluster_ = &cluster;
  sched::PolicyContext context;
  context.cluster = &cluster;
  placement_ = sched::make_policy(placement_name_, context);
  scheduler_ = std::make_unique<sched::Scheduler>(cluster, *placement_);
  resolver_ = std::make_unique<sched::RequestResolver>(cluster);
  layer_ = std::make_unique<sched::jobs::JobLayer>(
      cluster, tree_,
      [this, core = sched::jobs::core_placer(cluster, *scheduler_, *resolver_)](
          const workload::JobSpec& job, int count, std::span<const cluster::Placement> near,
          sched::jobs::PlacementFailure* why) -> std::optional<std::vector<cluster::Placement>> {
        if (!only_job_.empty() && job.name != only_job_) return std::nullopt;
        return core(job, count, near, why);
      });
}

JobState& JobLayerRun::state(Job& job, const SpecOf& spec_of) {
  const std::size_t id = job.spec().id;
  if (id >= kept_.size()) kept_.resize(id + 1);
  JobState& s = kept_[id];
  if (s.spec == nullptr) {
    s.spec = spec_of ? &spec_of(job) : &job.spec();
    s.queue = default_queue_ ? 0 : *tree_.find(job.spec().queue);
    s.rank = double(id);
  }
  return s;
}

std::span<JobState* const> JobLayerRun::states(std::span<Job* const> active,
                                               const SpecOf& spec_of) {
  refs_.clear();
  jobs_.assign(active.begin(), active.end());
  for (Job* j : active) refs_.push_back(&state(*j, spec_of));
  return refs_;
}

Reallocations JobLayerRun::round(cluster::Cluster& cluster,
                                 const sched::jobs::RoundOptions& options) {
  if (layer_ == nullptr || cluster_ != &cluster) start(cluster);
  layer_->round(refs_, options);
  Reallocations out;
  for (std::size_t i = 0; i < refs_.size(); ++i) {
    if (refs_[i]->changed) out.push_back({jobs_[i], refs_[i]->placements});
  }
  return out;
}

Reallocations JobLayerRun::round(cluster::Cluster& cluster, std::span<Job* const> jobs,
                                 const sched::jobs::RoundOptions& options) {
  refs_.clear();
  jobs_.assign(jobs.begin(), jobs.end());
  for (const Job* j : jobs) refs_.push_back(&kept_[j->spec().id]);
  return round(cluster, options);
}

void JobLayerRun::round_on(cluster::Cluster& cluster, std::span<JobState* const> states,
                           const sched::jobs::RoundOptions& options, std::string_view only_job) {
  if (layer_ == nullptr || cluster_ != &cluster) start(cluster);
  only_job_ = only_job;
  struct Reset {
    std::string& only;
    ~Reset() { only.clear(); }
  } reset{only_job_};
  layer_->round(states, options);
}

void JobLayerRun::shrink(cluster::Cluster& cluster, sched::jobs::JobState& state, int n) {
  if (layer_ == nullptr || cluster_ != &cluster) start(cluster);
  layer_->shrink(state, n);
}

Reallocations JobLayerRun::sized_round(cluster::Cluster& cluster, Seconds now,
                                       std::vector<sched::jobs::ElasticDemand> demands,
                                       const Sizing& how) {
  for (std::size_t i = 0; i < refs_.size(); ++i) {
    const workload::JobSpec& spec = *refs_[i]->spec;
    demands[i].queue = refs_[i]->queue;
    demands[i].priority = spec.priority;
    demands[i].min = spec.min_replicas;
    demands[i].keep = spec.preemptible ? 0 : refs_[i]->replicas();
    demands[i].gpus_per_replica =
        double(spec.replica.gpu_count) * double(spec.replica.gpu_milli) / 1000.0;
    demands[i].cpu_milli_per_replica = double(spec.replica.cpu_milli);
    demands[i].memory_mib_per_replica = double(spec.replica.memory_mib);
    // With GPU models: those it would try (empty: no queue names one). A running job keeps its
    // model, unless a resize places it anew anyway (repack: the round moves only elastic jobs)
    // and it may be preempted.
    demands[i].models = sched::jobs::model_order(cluster, tree_, *refs_[i],
                                                 how.repack && spec.preemptible && spec.elastic());
  }
  // CPU and memory count where the nodes give them (a node list with CPU figures; the Pollux
  // and Philly clusters have none); each GPU model a queue names is divided as a resource of its
  // own (the cluster's GPUs of it).
  const sched::jobs::Amounts capacity = sched::jobs::cluster_capacity(cluster, &tree_);
  const auto [counts, models] =
      sched::jobs::size_by_value_per_model(tree_, capacity, demands, how.sizing);
  for (std::size_t i = 0; i < refs_.size(); ++i) {
    refs_[i]->wanted = counts[i];
    refs_[i]->sized_model = models[i];
    // Ties in submission order (the layer's sort is stable).
    refs_[i]->rank = how.larger_first ? -double(counts[i]) : double(counts[i]);
  }
  sched::jobs::RoundOptions options;
  options.now = now;
  options.sized = true;
  options.repack = how.repack;
  options.explain = false;  // the simulator reports outcomes, not per-round explanations
  return round(cluster, options);
}

}  // namespace gpuorch::sim

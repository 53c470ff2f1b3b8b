#include "gpuorch/sim/timeline_engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace gpuorch::sim {
namespace {

// Compared in place: this runs for every active job at every tick.
bool same_allocation(const std::vector<cluster::Placement>& a, const Job& j) {
  const auto& ids = j.allocation();
  std::size_t at = 0;
  for (const auto& p : a) {
    for (std::size_t g = 0; g < p.gpus.size(); ++g, ++at) {
      if (at >= ids.size() || ids[at] != p.node) return false;
    }
  }
  return at == ids.size();
}

Seconds next_tick_at_or_after(Seconds t, Seconds interval) {
  return (t + interval - 1) / interval * interval;
}

}  // namespace

const char* event_key(TimelineEvent::Kind kind) {
  switch (kind) {
    case TimelineEvent::Kind::kArrive:
      return "arrive";
    case TimelineEvent::Kind::kStart:
      return "start";
    case TimelineEvent::Kind::kResize:
      return "resize";
    case TimelineEvent::Kind::kPreempt:
      return "preempt";
    case TimelineEvent::Kind::kFinish:
      return "finish";
    case TimelineEvent::Kind::kReport:
      return "report";
  }
  return "?";
}

std::vector<cluster::NodeSpec> uniform_nodes(int count, int gpus) {
  std::vector<cluster::NodeSpec> out;
  for (int i = 0; i < count; ++i) {
    cluster::NodeSpec n;
    n.name = fmt::format("node-{}", i);
    n.gpu_count = gpus;
    n.gpu_model = "V100";
    out.push_back(std::move(n));
  }
  return out;
}

TimelineResult run_timeline(const std::vector<JobSpec>& specs, const AppTable& apps,
                            const std::vector<cluster::NodeSpec>& nodes, TimelinePolicy& policy,
                            const std::string& policy_name, const TimelineOptions& options) {
  cluster::Cluster cluster(nodes);
  ReplicaPlacer placer(cluster);
  std::vector<Job> jobs;
  jobs.reserve(specs.size());
  for (const auto& s : specs) {
    const AppProfile* app = nullptr;
    if (!s.application.empty()) app = &apps.at(s.application);
    jobs.emplace_back(s, app, policy.batch_rule());
  }
  // Arrivals in submission order (ties in workload order).
  std::vector<std::size_t> arrival(jobs.size());
  for (std::size_t i = 0; i < arrival.size(); ++i) arrival[i] = i;
  std::stable_sort(arrival.begin(), arrival.end(),
                   [&](std::size_t a, std::size_t b) { return specs[a].submit < specs[b].submit; });

  TimelineResult result;
  result.policy = policy_name;
  result.total_gpus = cluster.gpu_total();
  for (const auto& s : specs) result.queues.push_back(s.queue);
  std::sort(result.queues.begin(), result.queues.end());
  result.queues.erase(std::unique(result.queues.begin(), result.queues.end()), result.queues.end());
  std::vector<std::size_t> queue_of;  // per job, its index in result.queues
  for (const auto& s : specs) {
    queue_of.push_back(static_cast<std::size_t>(
        std::lower_bound(result.queues.begin(), result.queues.end(), s.queue) -
        result.queues.begin()));
  }
  const std::vector<int> no_gpus_by_queue(result.queues.size(), 0);
  ModelUseMeter model_use(cluster, result.queues.size());
  const Seconds dt = options.interval;
  std::size_t next_arrival = 0, done = 0;
  // Both by job id: `active` is what the policy sees, `running` (the jobs with GPUs) is what
  // advances; the sample's totals are kept as jobs change, so a tick costs O(running + changes),
  // not O(active), however long the queue.
  std::vector<Job*> active, running;
  std::vector<Job*> arrived, finished;  // since the policy's last round (TickEvents)
  TickEvents events;
  const auto by_id = [](const Job* a, const Job* b) { return a->spec().id < b->spec().id; };
  TimelineSample held{0, 0, 0, 0, 0, no_gpus_by_queue};  // what `running` holds
  const auto queue_index = [&](const Job* j) {
    return queue_of[static_cast<std::size_t>(j - jobs.data())];
  };
  // A job's GPUs change from what it held: the totals and the running set follow.
  const auto account = [&](Job* j, int before) {
    const int after = j->gpus();
    held.allocated_gpus += after - before;
    held.gpus_by_queue[queue_index(j)] += after - before;
    if (before == 0 && after > 0) {
      running.insert(std::lower_bound(running.begin(), running.end(), j, by_id), j);
    } else if (before > 0 && after == 0) {
      running.erase(std::lower_bound(running.begin(), running.end(), j, by_id));
    }
  };
  const auto record = [&](Seconds at, TimelineEvent::Kind kind, const Job* j) {
    if (!options.record_events) return;
    result.events.push_back({at,
                             kind,
                             static_cast<std::size_t>(j - jobs.data()),
                             static_cast<int>(j->placements().size()),
                             j->gpus(),
                             {}});
  };
  Seconds now = 0;
  while (done < jobs.size()) {
    // The next event that can change anything: the next tick while jobs are active, else the
    // first tick at or after the next arrival.
    Seconds next = now + dt;
    if (active.empty() && next_arrival < arrival.size()) {
      next = std::max(next, next_tick_at_or_after(specs[arrival[next_arrival]].submit, dt));
    }
    // What the allocation of the last sample was worth is known once it has run.
    double useful = 0;  // goodput GPU-seconds of this interval
    for (const Job* j : running) useful -= j->useful_gpu_seconds();
    for (Job* j : running) j->advance(now, next - now);
    model_use.advance(double(next - now));
    for (const Job* j : running) useful += j->useful_gpu_seconds();
    if (!running.empty()) result.samples.back().goodput_gpus = useful / double(next - now);
    now = next;
    ++result.ticks;
    // Arrivals join in workload order, the order the policies see them in.
    const std::size_t first_new = active.size();
    while (next_arrival < arrival.size() && specs[arrival[next_arrival]].submit <= now) {
      active.push_back(&jobs[arrival[next_arrival++]]);
      arrived.push_back(active.back());
      record(now, TimelineEvent::Kind::kArrive, active.back());
    }
    if (first_new < active.size()) {
      const auto mid = active.begin() + static_cast<std::ptrdiff_t>(first_new);
      std::sort(mid, active.end(), by_id);
      std::inplace_merge(active.begin(), mid, active.end(), by_id);
    }
    // Finished jobs hand their GPUs back at the tick boundary (only running jobs progress).
    for (std::size_t i = 0; i < running.size();) {
      Job* j = running[i];
      if (!j->complete()) {
        ++i;
        continue;
      }
      const int before = j->gpus();
      placer.release(j->placements());
      model_use.change(queue_index(j), j->placements(), -1);
      j->reallocate(now, {});
      account(j, before);  // erases running[i]
      active.erase(std::lower_bound(active.begin(), active.end(), j, by_id));
      finished.push_back(j);
      record(now, TimelineEvent::Kind::kFinish, j);
      ++done;
    }
    if (active.empty()) {
      if (!result.samples.empty() && result.samples.back().running > 0) {
        result.samples.push_back({now, 0, 0, 0, 0, no_gpus_by_queue});
      }
      if (options.on_progress) options.on_progress(done, jobs.size());
      continue;
    }
    // The policy names the jobs whose placements change; the others keep theirs.
    events.known = true;
    events.arrived = arrived;
    events.finished = finished;
    Reallocations changes = policy.allocate(now, active, placer, events);
    arrived.clear();  // delivered (an idle tick keeps them for the next round)
    finished.clear();
    if (options.record_events) {
      for (const auto& p : policy.published()) {
        const auto id = static_cast<std::size_t>(p.job - jobs.data());
        result.events.push_back({now, TimelineEvent::Kind::kReport, id,
                                 static_cast<int>(p.job->placements().size()), p.job->gpus(),
                                 p.report});
      }
    }
    for (Reallocation& change : changes) {
      Job* j = change.job;
      if (same_allocation(change.placements, *j)) continue;
      const int before = j->gpus();
      const std::size_t had = j->placements().size();
      model_use.change(queue_index(j), j->placements(), -1);
      j->reallocate(now, std::move(change.placements));
      model_use.change(queue_index(j), j->placements(), +1);
      account(j, before);
      const std::size_t has = j->placements().size();
      record(now,
             had == 0   ? TimelineEvent::Kind::kStart
             : has == 0 ? TimelineEvent::Kind::kPreempt
                        : TimelineEvent::Kind::kResize,
             j);
    }
    if (options.record_events) {
      for (const auto& b : policy.started_and_preempted()) {
        const auto id = static_cast<std::size_t>(b.job - jobs.data());
        result.events.push_back({now, TimelineEvent::Kind::kStart, id, b.replicas, b.gpus, {}});
        result.events.push_back({now, TimelineEvent::Kind::kPreempt, id, 0, 0, {}});
      }
    }
    held.time = now;
    held.running = static_cast<int>(running.size());
    held.queued = static_cast<int>(active.size() - running.size());
    result.samples.push_back(held);
    if (running.empty() && next_arrival == arrival.size()) {
      throw std::runtime_error(fmt::format(
          "policy {} leaves {} job(s) without GPUs on an idle cluster (first: {}): they can "
          "never run",
          policy_name, active.size(), active.front()->spec().name));
    }
    if (options.on_progress) options.on_progress(done, jobs.size());
  }
  result.gpu_models = model_use.models();
  result.model_use = model_use.use();
  for (const Job& j : jobs) {
    result.jobs.push_back({j.spec().name, j.spec().queue, j.spec().submit, j.first_start(),
                           j.completion(), j.attained_service(), j.useful_gpu_seconds(),
                           std::max(j.restarts(), 0)});
  }
  return result;
}

}  // namespace gpuorch::sim

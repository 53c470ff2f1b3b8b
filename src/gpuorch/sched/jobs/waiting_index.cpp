#include "gpuorch/sched/jobs/waiting_index.hpp"

#include <algorithm>
#include <stdexcept>

namespace gpuorch::sched::jobs {
namespace {

// Half a unit of slack on integer amounts: a job is left out only when it surely could not go
// (the round compares with 1e-9 of slack).
bool beyond(const Resources& r, const Amounts& cap) {
  for (std::size_t k = 0; k < kResourceKinds; ++k) {
    if (double(r.v[k]) > cap[k] + 0.5) return true;
  }
  return false;
}

int gang_count(const workload::JobSpec& spec) { return std::max(1, spec.min_replicas); }

bool plain(const workload::JobSpec& spec) {
  return spec.replica.allowed_models.empty() &&
         spec.replica.constraints == workload::NodeConstraints{} && spec.topology_levels.empty();
}

}  // namespace

WaitingIndex::Entry WaitingIndex::entry(const JobState& s) {
  return {-s.spec->priority, s.rank, s.seq, const_cast<JobState*>(&s), 0};
}

WaitingIndex::Group* WaitingIndex::group(const JobState& s) {
  return const_cast<Group*>(std::as_const(*this).group(s));
}

const WaitingIndex::Group* WaitingIndex::group(const JobState& s) const {
  const Resources replica = request_of(s.spec->replica);
  const int count = gang_count(*s.spec);
  const bool p = plain(*s.spec);
  for (const Group& g : groups_.at(s.queue)) {
    if (g.replica == replica && g.count == count && g.plain == p) return &g;
  }
  return nullptr;
}

void WaitingIndex::add(JobState& s) {
  if (s.spec->elastic() || s.replicas() > 0) {
    throw std::invalid_argument("WaitingIndex holds waiting rigid jobs only");
  }
  Group* g = group(s);
  if (g == nullptr) {
    auto& gs = groups_.at(s.queue);
    gs.push_back({request_of(s.spec->replica), gang_count(*s.spec), plain(*s.spec), {}});
    g = &gs.back();
  }
  if (g->jobs.insert(entry(s)).second) {
    demand_[s.queue] += g->gang();
    ++size_;
  }
}

void WaitingIndex::remove(const JobState& s) {
  Group* g = group(s);
  if (g == nullptr || g->jobs.erase(entry(s)) == 0) return;
  demand_[s.queue] -= g->gang();
  --size_;
  if (g->jobs.empty()) {
    auto& gs = groups_[s.queue];
    gs.erase(gs.begin() + (g - gs.data()));
  }
}

bool WaitingIndex::contains(const JobState& s) const {
  const Group* g = group(s);
  return g != nullptr && g->jobs.count(entry(s)) > 0;
}

void WaitingIndex::selectable(const OrderStart& at, std::vector<JobState*>& out) {
  for (std::size_t q = 0; q < groups_.size(); ++q) {
    if (groups_[q].empty()) continue;
    const Amounts& budget = at.budgets[q];
    walk_.clear();
    for (const JobState* x : at.jobs(q)) {
      // A running job that cannot be preempted is taken before the walk (if it fits); a
      // waiting elastic job's size is the policy's: neither is counted.
      const bool running = x->replicas() > 0;
      if (running ? !x->spec->preemptible : x->spec->elastic()) continue;
      walk_.push_back({entry(*x), request_of(x->spec->replica) *
                                      (running ? x->replicas() : gang_count(*x->spec))});
    }
    for (const Group& g : groups_[q]) {
      const Resources gang = g.gang();
      if (beyond(gang, budget)) continue;
      // What the round's jobs ahead that ask no more than this gang take if it is selected.
      Resources ahead;
      std::size_t w = 0;
      Resources mine;  // this group's jobs up to the current one
      for (const Entry& e : g.jobs) {
        for (; w < walk_.size() && walk_[w].at < e; ++w) {
          if (walk_[w].need.fits_in(gang)) ahead += walk_[w].need;
        }
        mine += gang;
        if (beyond(ahead + mine, budget)) break;
        e.added = round_;
        out.push_back(e.job);
      }
    }
  }
}

void WaitingIndex::startable(const OverShareStart& at, std::vector<JobState*>& out) {
  const Amounts& free = at.free;
  for (const std::size_t q : at.queues) {
    for (const Group& g : groups_.at(q)) {
      const Resources gang = g.gang();
      if (beyond(gang, free)) continue;
      Resources before;  // this group's jobs up to the current one
      for (const Entry& e : g.jobs) {
        if (e.added == round_) continue;
        before += gang;
        if (g.plain && beyond(before, free)) break;
        e.added = round_;
        out.push_back(e.job);
      }
    }
  }
}

JobState* WaitingIndex::next_candidate(const CandidateQuery& at) {
  const Entry* best = nullptr;
  const Entry before = at.before == nullptr ? Entry{} : entry(*at.before);
  for (const Group& g : groups_.at(at.queue)) {
    const bool failed =
        g.plain && std::any_of(at.failed.begin(), at.failed.end(), [&](const auto& f) {
          return f.first == g.replica && f.second == g.count;
        });
    // Otherwise only jobs above priority_above, the first of the group (priority descending).
    const bool by_room = at.any || (!failed && !beyond(g.gang(), at.room));
    auto it = at.after == nullptr ? g.jobs.begin() : g.jobs.upper_bound(entry(*at.after));
    for (; it != g.jobs.end(); ++it) {
      if (at.before != nullptr && !(*it < before)) break;
      if (best != nullptr && !(*it < *best)) break;
      if (!by_room && -it->priority <= at.priority_above) break;
      if (it->added == round_) continue;
      best = &*it;
      break;
    }
  }
  if (best == nullptr) return nullptr;
  best->added = round_;
  return best->job;
}

}  // namespace gpuorch::sched::jobs

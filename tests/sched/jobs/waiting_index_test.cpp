// WaitingIndex against the round over every job: on random queues, clusters and jobs (gangs of
// one- and two-GPU replicas, some asking CPU, priorities, jobs that cannot be preempted), a round
// over the served jobs that adds back what the index names decides exactly as the round over
// every active job, round after round, while jobs come, finish and are re-ranked.
#include "gpuorch/sched/jobs/waiting_index.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <map>
#include <random>

#include "gpuorch/sched/jobs/core_placer.hpp"
#include "gpuorch/sched/policy.hpp"
#include "sched/jobs/gpu_queue.hpp"
#include "support/test_support.hpp"

namespace gpuorch::sched::jobs {
namespace {

struct World {
  World(const std::vector<workload::QueueSpec>& qs, const std::vector<cluster::NodeSpec>& nodes)
      : tree(qs), c(nodes) {}
  QueueTree tree;
  cluster::Cluster c;
  std::unique_ptr<Policy> policy = make_policy("most-free", PolicyContext{&c});
  Scheduler scheduler{c, *policy};
  RequestResolver resolver{c};
  JobLayer layer{c, tree, core_placer(c, scheduler, resolver)};
  std::deque<workload::JobSpec> specs;
  std::deque<JobState> states;  // by job id
  std::vector<bool> active;
  std::map<const JobState*, std::size_t> id_of;

  void add(const workload::JobSpec& spec, double rank) {
    specs.push_back(spec);
    JobState s;
    s.spec = &specs.back();
    s.queue = *tree.find(spec.queue);
    s.rank = rank;
    states.push_back(std::move(s));
    id_of.emplace(&states.back(), states.size() - 1);
    active.push_back(true);
  }
  void finish(std::size_t id) {
    for (const auto& p : states[id].placements) c.release(p);
    states[id].placements.clear();
    active[id] = false;
  }
};

RoundOptions rank_round(std::int64_t now) {
  RoundOptions o;
  o.now = now;
  o.backfill = true;
  o.preempt_by_rank = true;
  o.explain = false;
  return o;
}

using Pick = std::function<int(int lo, int hi)>;

// Leaf queues q0.. under "top", with quotas and weights (and limits of 8 GPUs on some).
std::vector<workload::QueueSpec> random_queues(const Pick& pick, int leaves, bool limits) {
  std::vector<workload::QueueSpec> qs;
  qs.push_back(test::gpu_queue("top", 0));
  for (int q = 0; q < leaves; ++q) {
    const int quota = pick(0, 6);
    const int limit = limits && pick(0, 3) == 0 ? 8 : -1;
    auto spec = test::gpu_queue(fmt::format("q{}", q), quota, limit);
    spec.parent = "top";
    spec.gpu.over_quota_weight = pick(1, 3);
    qs.push_back(spec);
  }
  return qs;
}

std::vector<cluster::NodeSpec> random_nodes(const Pick& pick) {
  std::vector<cluster::NodeSpec> nodes;
  const int n_nodes = pick(2, 4);
  for (int n = 0; n < n_nodes; ++n)
    nodes.push_back(test::gpu_node(fmt::format("n{}", n), 16000, 4));
  return nodes;
}

// A rigid gang of one- or two-GPU replicas, some asking CPU, some of higher priority, some that
// cannot be preempted.
workload::JobSpec random_job(const Pick& pick, std::string name, int leaves) {
  workload::JobSpec s;
  s.name = std::move(name);
  s.queue = fmt::format("q{}", pick(0, leaves - 1));
  const int per = pick(0, 4) == 0 ? 2 : 1;
  s.replica.gpu_count = per;
  if (pick(0, 4) == 0) s.replica.cpu_milli = 2000 * pick(1, 3);
  static constexpr int kSizes[] = {1, 1, 1, 2, 2, 4, 8};
  s.min_replicas = s.max_replicas = std::max(1, kSizes[pick(0, 6)] / per);
  s.priority = pick(0, 5) == 0 ? 1 : 0;
  s.preemptible = pick(0, 9) != 0;
  return s;
}

// Every active job holds the same GPUs in both worlds.
void expect_same_placements(const World& full, const World& lazy, std::uint32_t seed, int step) {
  for (std::size_t id = 0; id < full.states.size(); ++id) {
    if (!full.active[id]) continue;
    const JobState& a = full.states[id];
    const JobState& b = lazy.states[id];
    const std::string where = fmt::format("seed {} step {} job {}", seed, step, a.spec->name);
    ASSERT_EQ(a.replicas(), b.replicas()) << where;
    for (std::size_t r = 0; r < a.placements.size(); ++r) {
      EXPECT_EQ(a.placements[r].node, b.placements[r].node) << where;
      EXPECT_EQ(a.placements[r].gpus, b.placements[r].gpus) << where;
    }
  }
}

void expect_same_round_with_the_index(std::uint32_t seed, int& added, int& left_out) {
  std::mt19937 rng(seed);
  const Pick pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int leaves = pick(1, 4);
  const auto qs = random_queues(pick, leaves, false);
  const auto nodes = random_nodes(pick);
  World full(qs, nodes), lazy(qs, nodes);
  WaitingIndex index(lazy.tree.size());
  std::vector<bool> served;  // lazy: with GPUs or selected by the last round
  double next_rank = 0;
  const auto arrive = [&] {
    const auto s = random_job(pick, fmt::format("j{}", full.specs.size()), leaves);
    const double rank = next_rank++;
    full.add(s, rank);
    lazy.add(s, rank);
    served.push_back(false);
    index.add(lazy.states.back());
  };
  for (int i = pick(5, 20); i > 0; --i) arrive();
  for (int step = 0; step < 12; ++step) {
    const std::int64_t now = step * 100;
    std::vector<JobState*> all, listed;
    for (std::size_t id = 0; id < full.states.size(); ++id) {
      if (!full.active[id]) continue;
      all.push_back(&full.states[id]);
      if (served[id]) listed.push_back(&lazy.states[id]);
    }
    full.layer.round(all, rank_round(now));
    RoundOptions o = rank_round(now);
    index.begin_round();
    o.unlisted_demand = index.demand();
    std::vector<JobState*> more;
    o.more_to_order = [&](const OrderStart& at, std::vector<JobState*>& out) {
      const std::size_t from = out.size();
      index.selectable(at, out);
      more.insert(more.end(), out.begin() + std::ptrdiff_t(from), out.end());
    };
    o.more_over_share = [&](const OverShareStart& at, std::vector<JobState*>& out) {
      const std::size_t from = out.size();
      index.startable(at, out);
      more.insert(more.end(), out.begin() + std::ptrdiff_t(from), out.end());
    };
    lazy.layer.round(listed, o);
    added += int(more.size());
    for (JobState* s : more) index.remove(*s);
    listed.insert(listed.end(), more.begin(), more.end());
    left_out += int(index.size());
    for (JobState* s : listed) {
      const std::size_t id = lazy.id_of.at(s);
      served[id] = s->replicas() > 0 || s->selected;
      if (!served[id]) index.add(*s);
    }
    expect_same_placements(full, lazy, seed, step);
    if (::testing::Test::HasFatalFailure()) return;
    for (std::size_t id = 0; id < full.states.size(); ++id) {
      if (!full.active[id]) continue;
      const JobState& a = full.states[id];
      EXPECT_EQ(a.replicas() > 0 || a.selected, bool(served[id]))
          << fmt::format("seed {} step {} job {}", seed, step, a.spec->name);
    }
    // Between rounds: some jobs finish, some come, some being served move back in the order
    // (as least attained service demotes them): never one the index holds.
    for (std::size_t id = 0; id < full.states.size(); ++id) {
      if (!full.active[id] || !served[id]) continue;
      if (full.states[id].replicas() > 0 && pick(0, 3) == 0) {
        full.finish(id);
        lazy.finish(id);
        served[id] = false;
      } else if (pick(0, 4) == 0) {
        full.states[id].rank = lazy.states[id].rank = 1e6 + next_rank++;
      }
    }
    for (int i = pick(0, 5); i > 0; --i) arrive();
  }
}

// sjf's round (backfilling, no preemption by rank): the running jobs listed, every waiting one
// in the index; ranks tie (seq breaks them), queues have limits, jobs priorities, CPU and
// preemptibility, so reclaim, priority preemption and limits all meet the jobs left out.
void expect_same_backfill_round_with_the_index(std::uint32_t seed, int& asked, int& left_out,
                                               int& started_by_post_filter) {
  std::mt19937 rng(seed);
  const Pick pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int leaves = pick(2, 4);
  const auto qs = random_queues(pick, leaves, true);
  const auto nodes = random_nodes(pick);
  World full(qs, nodes), lazy(qs, nodes);
  WaitingIndex index(lazy.tree.size());
  const auto wait = [&](std::size_t id) {
    const double rank = pick(0, 6);  // ties: seq (the id) decides
    full.states[id].rank = lazy.states[id].rank = rank;
    index.add(lazy.states[id]);
  };
  const auto arrive = [&] {
    const auto s = random_job(pick, fmt::format("j{}", full.specs.size()), leaves);
    full.add(s, 0);
    lazy.add(s, 0);
    full.states.back().seq = lazy.states.back().seq = full.states.size() - 1;
    wait(full.states.size() - 1);
  };
  for (int i = pick(5, 30); i > 0; --i) arrive();
  for (int step = 0; step < 12; ++step) {
    RoundOptions o;
    o.now = step * 100;
    o.explain = false;
    std::vector<JobState*> all, listed;
    for (std::size_t id = 0; id < full.states.size(); ++id) {
      if (!full.active[id]) continue;
      all.push_back(&full.states[id]);
      if (lazy.states[id].replicas() > 0) listed.push_back(&lazy.states[id]);
    }
    full.layer.round(all, o);
    index.begin_round();
    o.unlisted_demand = index.demand();
    std::vector<JobState*> more, candidates;
    o.more_to_allocate = [&](const OverShareStart& at, std::vector<JobState*>& out) {
      const std::size_t from = out.size();
      index.startable(at, out);
      more.insert(more.end(), out.begin() + std::ptrdiff_t(from), out.end());
    };
    o.next_candidate = [&](const CandidateQuery& at) {
      JobState* s = index.next_candidate(at);
      if (s != nullptr) candidates.push_back(s);
      return s;
    };
    lazy.layer.round(listed, o);
    for (const JobState* s : candidates) started_by_post_filter += s->replicas() > 0 ? 1 : 0;
    more.insert(more.end(), candidates.begin(), candidates.end());
    asked += int(more.size());
    left_out += int(index.size() - more.size());
    for (JobState* s : more) {
      if (s->replicas() > 0) index.remove(*s);
    }
    expect_same_placements(full, lazy, seed, step);
    if (::testing::Test::HasFatalFailure()) return;
    // Between rounds: preempted jobs wait again (a new rank), some running jobs finish, some
    // jobs come.
    for (JobState* s : listed) {
      if (s->replicas() == 0) wait(lazy.id_of.at(s));
    }
    for (std::size_t id = 0; id < full.states.size(); ++id) {
      if (full.active[id] && full.states[id].replicas() > 0 && pick(0, 3) == 0) {
        full.finish(id);
        lazy.finish(id);
      }
    }
    for (int i = pick(0, 8); i > 0; --i) arrive();
  }
}

TEST(WaitingIndex, ABackfillingRoundWithTheIndexDecidesAsTheRoundOverEveryJob) {
  int asked = 0, left_out = 0, started_by_post_filter = 0;
  for (std::uint32_t seed = 1; seed <= 150; ++seed) {
    expect_same_backfill_round_with_the_index(seed, asked, left_out, started_by_post_filter);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Jobs were asked back, left out, and started by reclaim or priority from the index.
  EXPECT_GT(asked, 0);
  EXPECT_GT(left_out, 0);
  EXPECT_GT(started_by_post_filter, 0);
}

TEST(WaitingIndex, ARoundWithTheIndexDecidesAsTheRoundOverEveryJob) {
  int added = 0, left_out = 0;
  for (std::uint32_t seed = 1; seed <= 300; ++seed) {
    expect_same_round_with_the_index(seed, added, left_out);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Both ways were taken: jobs added back, and jobs left out of rounds.
  EXPECT_GT(added, 0);
  EXPECT_GT(left_out, 0);
}

}  // namespace
}  // namespace gpuorch::sched::jobs

#include "gpuorch/sched/jobs/job_layer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <stdexcept>
#include <tuple>

namespace gpuorch::sched::jobs {
namespace {

constexpr double kEps = 1e-9;

Amounts to_amounts(const Resources& r) {
  Amounts a{};
  for (std::size_t k = 0; k < kResourceKinds; ++k) a[k] = double(r.v[k]);
  return a;
}

// Whether `p` could be bound again as it was (a victim restored when it was not needed).
bool placement_fits(const cluster::Cluster& c, const cluster::Placement& p) {
  if (c.cpu_free(p.node) < p.cpu_milli || c.memory_free(p.node) < p.memory_mib) return false;
  const auto left = c.gpu_milli_left(p.node);
  return std::all_of(p.gpus.begin(), p.gpus.end(), [&](int g) {
    return g >= 0 && std::size_t(g) < left.size() && left[std::size_t(g)] >= p.gpu_milli;
  });
}

double gpus(const Amounts& a) { return a[0] / 1000.0; }

}  // namespace

const char* wait_key(WaitReason r) {
  switch (r) {
    case WaitReason::kNone:
      return "none";
    case WaitReason::kOverLimit:
      return "over-limit";
    case WaitReason::kOverQuota:
      return "over-quota";
    case WaitReason::kShareHeld:
      return "share-used-by-others";
    case WaitReason::kLowerPriority:
      return "lower-priority";
    case WaitReason::kFragmented:
      return "fragmented";
    case WaitReason::kInfeasible:
      return "infeasible";
  }
  return "unknown";
}

const char* preempt_key(PreemptReason r) {
  switch (r) {
    case PreemptReason::kReclaim:
      return "reclaim";
    case PreemptReason::kPriority:
      return "priority";
    case PreemptReason::kQueueOrder:
      return "queue-order";
    case PreemptReason::kResized:
      return "resized";
    case PreemptReason::kPostFilter:
      return "post-filter";
  }
  return "unknown";
}

// A built-in post-filter: what it does is the round's (reclaim or priority preemption), set for
// the length of a round; outside a round it cannot help.
class JobLayer::RoundPostFilter final : public PostFilterPlugin {
 public:
  using Act = std::function<bool(std::size_t job, std::vector<sched::Victim>& victims)>;
  explicit RoundPostFilter(PreemptReason reason) : reason_(reason) {}
  [[nodiscard]] std::string_view name() const override { return preempt_key(reason_); }
  void set(Act act) { act_ = std::move(act); }

  PostFilterResult post_filter(const PostFilterArgs& args) override {
    PostFilterResult r;
    if (act_ && act_(args.id, r.victims)) {
      r.status = PostFilterStatus::kSuccess;
      r.reason = preempt_key(reason_);
    }
    return r;
  }

 private:
  PreemptReason reason_;
  Act act_;
};

JobLayer::~JobLayer() = default;

void JobLayer::shrink(JobState& job, int n) {
  for (int i = 0; i < n && !job.placements.empty(); ++i) {
    cluster_->release(job.placements.back());
    job.placements.pop_back();
  }
}

JobLayer::JobLayer(cluster::Cluster& cluster, const QueueTree& queues, GangPlacer placer)
    : cluster_(&cluster), queues_(&queues), placer_(std::move(placer)), resolver_(cluster) {
  auto reclaim = std::make_unique<RoundPostFilter>(PreemptReason::kReclaim);
  auto priority = std::make_unique<RoundPostFilter>(PreemptReason::kPriority);
  reclaim_ = reclaim.get();
  priority_ = priority.get();
  post_filters_.add(std::move(reclaim));
  post_filters_.add(std::move(priority));
  capacity_ = cluster_capacity(cluster, &queues);
}

Amounts cluster_capacity(const cluster::Cluster& cluster, const QueueTree* models) {
  Amounts out{};
  out[0] = double(cluster.gpu_milli_capacity());
  const bool by_model = models != nullptr && !models->gpu_models().empty();
  for (cluster::NodeIndex n = 0; n < cluster.node_count(); ++n) {
    const auto& spec = cluster.spec(n);
    out[1] += double(spec.cpu_milli);
    out[2] += double(spec.memory_mib);
    if (!by_model) continue;
    if (const auto k = models->model_slot(spec.gpu_model)) {
      out[*k] += 1000.0 * double(spec.gpu_count);
    }
  }
  return out;
}

namespace {

// The round's jobs, the caller's states by pointer (a simulator keeps them where they live);
// waiting jobs the caller left out may join during the round (RoundOptions::more_to_order).
class JobRefs {
 public:
  explicit JobRefs(std::span<JobState* const> p) : p_(p.begin(), p.end()) {}
  JobState& operator[](std::size_t i) const { return *p_[i]; }
  [[nodiscard]] std::size_t size() const { return p_.size(); }
  void add(JobState* s) { p_.push_back(s); }

 private:
  std::vector<JobState*> p_;
};

bool allows_model(const workload::JobSpec& spec, std::string_view m) {
  const auto& a = spec.replica.allowed_models;
  return a.empty() || std::find(a.begin(), a.end(), m) != a.end();
}

// The models (slots; kResourceKinds: models no queue names) a waiting job of queue q may run on,
// in the order it tries them: those its queue lists, in the queue's order, then the other models
// the queues name, then models no queue names (where the cluster has one it accepts).
std::vector<std::size_t> waiting_model_order(const cluster::Cluster& cluster, const QueueTree& tree,
                                             const workload::JobSpec& spec, std::size_t q) {
  const auto& names = tree.gpu_models();
  std::vector<std::size_t> out;
  for (const std::size_t k : tree.listed_slots(q)) {
    if (allows_model(spec, names[k - kFirstModelSlot])) out.push_back(k);
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::size_t k = kFirstModelSlot + i;
    if (allows_model(spec, names[i]) && std::find(out.begin(), out.end(), k) == out.end()) {
      out.push_back(k);
    }
  }
  for (const std::string& m : cluster.models()) {
    if (!m.empty() && !tree.model_slot(m) && allows_model(spec, m)) {
      out.push_back(kResourceKinds);
      break;
    }
  }
  return out;
}

}  // namespace

std::vector<std::size_t> model_order(const cluster::Cluster& cluster, const QueueTree& tree,
                                     const JobState& job, bool running_may_move) {
  const auto& r = job.spec->replica;
  if (tree.gpu_models().empty() || r.gpu_count <= 0 || r.gpu_milli <= 0) return {};
  std::vector<std::size_t> out = waiting_model_order(cluster, tree, *job.spec, job.queue);
  if (!job.placements.empty()) {
    const auto& model = cluster.spec(job.placements.front().node).gpu_model;
    const std::size_t now = tree.model_slot(model).value_or(kResourceKinds);
    if (!running_may_move) return {now};
    std::erase(out, now);
    out.insert(out.begin(), now);
  }
  return out;
}

// One round's working state: what each queue holds, what is free, and the jobs in their order.
struct JobLayer::Round {
  JobLayer& layer;
  JobRefs jobs;
  const RoundOptions& options;
  RoundStats stats;
  std::vector<Resources> replica;  // per job: one replica's request
  std::vector<int> target;         // per job: replicas it should have after the round
  std::vector<std::vector<std::size_t>> by_queue;  // per queue: its jobs, in order
  Amounts free{};
  std::vector<Amounts> demand;  // per queue: what its jobs want (the fair shares' input)
  // A gang shape (replica request) that found no placement at this many replicas, since the
  // last time resources were freed: more of the same cannot be placed either.
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::size_t>, int> failed;
  std::map<std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::string>, bool> feasible_;

  // GPU models (only when a queue names one, QueueTree::gpu_models): per job the model its
  // GPUs are counted in, a Resources slot or kOtherModels (a model no queue names: counted in
  // `gpu` only), or kUndecided: a waiting job that accepts several, which tries them in its
  // queue's order when it starts (Kueue's flavor assignment).
  static constexpr std::size_t kUndecided = SIZE_MAX;
  static constexpr std::size_t kOtherModels = kResourceKinds;
  const bool by_model;
  // The kinds the round's loops visit: gpu, cpu, memory and the slots of the models named (the
  // other slots stay 0), so quotas per model cost nothing where no queue names one.
  const std::size_t kinds;
  std::vector<std::size_t> model;
  // A job placed as restricted to its model: its spec with allowed_models = that model.
  std::map<std::size_t, std::pair<std::size_t, workload::JobSpec>> restricted;

  Round(JobLayer& l, std::span<JobState* const> j, const RoundOptions& o)
      : layer(l),
        jobs(j),
        options(o),
        by_model(!l.queues_->gpu_models().empty()),
        kinds(kFirstModelSlot + l.queues_->gpu_models().size()) {}

  [[nodiscard]] const QueueTree& tree() const { return *layer.queues_; }
  cluster::Cluster& cluster() { return *layer.cluster_; }

  // What queue q and its parents hold changes by `r` (sign +1 or -1).
  void charge(std::size_t q, const Resources& r, double sign) {
    for (int at = int(q); at >= 0; at = tree().parent(std::size_t(at))) {
      for (std::size_t k = 0; k < kinds; ++k) {
        layer.allocated_[std::size_t(at)][k] += sign * double(r.v[k]);
      }
    }
  }

  // A replica bound (+1) or released (-1) in this round: its queue's and the free totals move.
  void hold(std::size_t q, const Resources& r, double sign) {
    charge(q, r, sign);
    for (std::size_t k = 0; k < kinds; ++k) free[k] -= sign * double(r.v[k]);
  }

  // The fewest replicas the job runs with (a gang of at least one).
  [[nodiscard]] int least(std::size_t j) const { return std::max(1, jobs[j].spec->min_replicas); }

  // The queue's dominant share after taking `extra`: the largest held / fair share over the
  // resources it holds or asks for (DRF); a resource held without any share counts as far over.
  [[nodiscard, gnu::always_inline]] double ratio(std::size_t q, const Resources& extra = {}) const {
    // gpu, cpu and memory in a loop of fixed length (the victims' walk calls this for each
    // candidate: a bound the compiler knows keeps it unrolled and inlined), then the models' slots.
    const auto part = [&](std::size_t k) {
      const double held = layer.allocated_[q][k] + double(extra.v[k]);
      if (held <= kEps) return 0.0;
      const double fair = layer.fair_[q][k];
      return fair <= kEps ? 1e12 : held / fair;
    };
    double worst = 0;
    for (std::size_t k = 0; k < kFirstModelSlot; ++k) worst = std::max(worst, part(k));
    for (std::size_t k = kFirstModelSlot; k < kinds; ++k) worst = std::max(worst, part(k));
    return worst;
  }

  [[nodiscard]] bool within_limit(std::size_t q, const Resources& extra) const {
    return !limit_passed(q, extra);
  }

  [[nodiscard]] bool beyond_capacity(const Resources& need) const {
    for (std::size_t k = 0; k < kinds; ++k) {
      if (double(need.v[k]) > layer.capacity_[k] + kEps) return true;
    }
    return false;
  }

  [[nodiscard]] bool fits_free(const Resources& need) const {
    for (std::size_t k = 0; k < kinds; ++k) {
      if (double(need.v[k]) > free[k] + kEps) return false;
    }
    return true;
  }

  void release(std::size_t j, int n) {
    JobState& s = jobs[j];
    for (int i = 0; i < n && !s.placements.empty(); ++i) {
      cluster().release(s.placements.back());
      s.placements.pop_back();
      hold(s.queue, replica[j], -1);
    }
    s.changed = true;
    failed.clear();
  }

  bool place(std::size_t j, int n, PlacementFailure* why) {
    JobState& s = jobs[j];
    const auto& r = s.spec->replica;
    const auto key = std::make_tuple(r.gpu_milli * r.gpu_count, r.cpu_milli, r.memory_mib,
                                     s.spec->topology_levels.size());
    const bool plain =
        !by_model && r.allowed_models.empty() && r.constraints == workload::NodeConstraints{};
    if (plain && s.placements.empty()) {
      const auto it = failed.find(key);
      if (it != failed.end() && it->second <= n) {
        if (why != nullptr) why->message = "no placement for a gang this large this round";
        return false;
      }
    }
    ++stats.placement_attempts;
    auto placed = layer.placer_(spec_to_place(j), n, s.placements, why);
    if (!placed) {
      if (plain && s.placements.empty()) {
        auto [it, fresh] = failed.emplace(key, n);
        if (!fresh) it->second = std::min(it->second, n);
      }
      return false;
    }
    if (s.placements.empty()) s.running_since = options.now;
    s.waiting = WaitReason::kNone;
    s.why.clear();
    for (auto& p : *placed) {
      s.placements.push_back(std::move(p));
      hold(s.queue, replica[j], +1);
    }
    s.changed = true;
    return true;
  }

  // The model slot of node n's GPUs (kOtherModels: a model no queue names).
  [[nodiscard]] std::size_t model_of_node(cluster::NodeIndex n) const {
    return tree().model_slot(layer.cluster_->spec(n).gpu_model).value_or(kOtherModels);
  }

  [[nodiscard]] static bool allows(const workload::JobSpec& spec, std::string_view m) {
    return allows_model(spec, m);
  }

  // The models (slots) a waiting job may run on, in the order it tries them.
  [[nodiscard]] std::vector<std::size_t> flavors(std::size_t j) const {
    return waiting_model_order(*layer.cluster_, tree(), *jobs[j].spec, jobs[j].queue);
  }

  // Counts job j's GPUs in model slot m from now on (its replica's request follows).
  void set_model(std::size_t j, std::size_t m) {
    model[j] = m;
    replica[j] = request_of(jobs[j].spec->replica,
                            m < kResourceKinds ? std::optional<std::size_t>(m) : std::nullopt);
  }

  // The spec the placer gets: restricted to the job's model when it may run on others too.
  const workload::JobSpec& spec_to_place(std::size_t j) {
    const workload::JobSpec& spec = *jobs[j].spec;
    if (!by_model || model[j] == kUndecided) return spec;
    std::vector<std::string> only;
    if (model[j] == kOtherModels) {
      for (const std::string& m : layer.cluster_->models()) {
        if (!m.empty() && !tree().model_slot(m) && allows(spec, m)) only.push_back(m);
      }
    } else {
      only.push_back(tree().gpu_models()[model[j] - kFirstModelSlot]);
    }
    if (only == spec.replica.allowed_models) return spec;
    auto [it, fresh] = restricted.try_emplace(j);
    if (fresh || it->second.first != model[j]) {
      it->second = {model[j], spec};
      it->second.second.replica.allowed_models = std::move(only);
    }
    return it->second.second;
  }

  // A resource kind as explanations name it.
  [[nodiscard]] std::string kind_name(std::size_t k) const {
    if (k >= kFirstModelSlot) {
      return fmt::format("GPUs of model {}", tree().gpu_models()[k - kFirstModelSlot]);
    }
    return k == 0 ? "GPUs" : k == 1 ? "CPU" : "memory";
  }

  // The first kind in which queue q (or a parent) would pass its limit after taking `extra`.
  [[nodiscard]] std::optional<std::size_t> limit_passed(std::size_t q,
                                                        const Resources& extra) const {
    for (int at = int(q); at >= 0; at = tree().parent(std::size_t(at))) {
      const auto& limit = tree().limit(std::size_t(at));
      for (std::size_t k = 0; k < kinds; ++k) {
        if (layer.allocated_[std::size_t(at)][k] + double(extra.v[k]) > limit[k] + kEps) return k;
      }
    }
    return std::nullopt;
  }

  // The reason, and its line only when the caller wants explanations (formatting one per
  // waiting job per round is most of a simulator round's cost).
  template <typename... Args>
  void wait(std::size_t j, WaitReason r, fmt::format_string<Args...> line, Args&&... args) {
    jobs[j].waiting = r;
    if (options.explain) jobs[j].why = fmt::format(line, std::forward<Args>(args)...);
  }

  // Whether one replica of `j` fits some node when that node is empty (resources and GPU model;
  // node constraints are left to the placer). Remembered per request for the round.
  bool feasible(std::size_t j) {
    const auto& r = jobs[j].spec->replica;
    auto key = std::make_tuple(r.gpu_count, r.gpu_milli, r.cpu_milli, r.memory_mib,
                               workload::join_models(r.allowed_models));
    if (const auto it = feasible_.find(key); it != feasible_.end()) return it->second;
    bool any = false;
    for (cluster::NodeIndex n = 0; n < cluster().node_count() && !any; ++n) {
      const auto& s = cluster().spec(n);
      const bool model_ok = r.allowed_models.empty() ||
                            std::find(r.allowed_models.begin(), r.allowed_models.end(),
                                      s.gpu_model) != r.allowed_models.end() ||
                            r.gpu_count == 0;
      any = model_ok && s.gpu_count >= r.gpu_count && s.cpu_milli >= r.cpu_milli &&
            s.memory_mib >= r.memory_mib;
    }
    feasible_.emplace(std::move(key), any);
    return any;
  }

  // Why a job that cannot get `need` from what is free waits, before any preemption.
  void wait_for_resources(std::size_t j, const Resources& need) {
    const std::size_t q = jobs[j].queue;
    if (!feasible(j) || beyond_capacity(need)) {
      wait(j, WaitReason::kInfeasible,
           "{} replica(s) of {} GPU(s) fit no node or exceed the cluster even when "
           "empty",
           need.gpu_milli() / std::max<std::int64_t>(1, replica[j].gpu_milli()),
           jobs[j].spec->replica.gpu_count);
      return;
    }
    const double after = ratio(q, need);
    const std::size_t m = by_model ? model[j] : kUndecided;
    if (m >= kFirstModelSlot && m < kResourceKinds) {
      const double fair = layer.fair_[q][m] / 1000.0;
      const double held = (layer.allocated_[q][m] + double(need.v[m])) / 1000.0;
      if (held > fair * (1 + kEps) + kEps) {
        wait(j, WaitReason::kOverQuota,
             "queue {} would hold {:.4g} {} against its fair share of {:.4g} (quota {:.4g})",
             tree().spec(q).name, held, kind_name(m), fair, tree().quota(q)[m] / 1000.0);
        return;
      }
      if (after <= 1 + kEps) {
        wait(j, WaitReason::kShareHeld,
             "within queue {}'s fair share of {} ({:.4g}), held by others: {:.4g} free, "
             "{:.4g} needed",
             tree().spec(q).name, kind_name(m), fair, free[m] / 1000.0, double(need.v[m]) / 1000.0);
        return;
      }
    }
    if (after > 1 + kEps) {
      wait(j, WaitReason::kOverQuota,
           "queue {} would hold {:.3g} times its fair share ({:.4g} GPUs)", tree().spec(q).name,
           after, gpus(layer.fair_[q]));
    } else {
      wait(j, WaitReason::kShareHeld,
           "within queue {}'s fair share ({:.4g} GPUs), held by others: {:.4g} GPUs "
           "free, {:.4g} needed",
           tree().spec(q).name, gpus(layer.fair_[q]), gpus(free),
           double(need.gpu_milli()) / 1000.0);
    }
  }

  void setup() {
    const std::size_t nq = tree().size();
    layer.allocated_.assign(nq, Amounts{});
    free[0] = double(cluster().gpu_milli_capacity() - cluster().gpu_milli_used());
    free[1] = free[2] = 0;
    for (cluster::NodeIndex n = 0; n < cluster().node_count(); ++n) {
      free[1] += double(cluster().cpu_free(n));
      free[2] += double(cluster().memory_free(n));
    }
    if (by_model) {
      for (cluster::NodeIndex n = 0; n < cluster().node_count(); ++n) {
        const std::size_t m = model_of_node(n);
        if (m < kResourceKinds) free[m] += double(cluster().gpu_milli_left_total(n));
      }
    }
    demand.assign(nq, Amounts{});
    replica.resize(jobs.size());
    target.resize(jobs.size());
    if (by_model) model.assign(jobs.size(), kUndecided);
    by_queue.assign(nq, {});
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      JobState& s = jobs[j];
      init(j);
      charge(s.queue, replica[j] * s.replicas(), +1);
      // A sized job's share is what the policy sized it to (what it holds above that goes now).
      const int asks = options.sized ? target[j] : std::max(target[j], s.replicas());
      const Amounts want = to_amounts(replica[j] * asks);
      for (std::size_t k = 0; k < kinds; ++k) demand[s.queue][k] += want[k];
      // A job that may take any of several models wants each of them (it takes one).
      if (by_model && model[j] == kUndecided) {
        for (const std::size_t m : flavors(j)) {
          if (m < kResourceKinds) demand[s.queue][m] += want[0];
        }
      }
      by_queue[s.queue].push_back(j);
    }
    for (std::size_t q = 0; q < options.unlisted_demand.size() && q < nq; ++q) {
      const Amounts more = to_amounts(options.unlisted_demand[q]);
      for (std::size_t k = 0; k < kinds; ++k) demand[q][k] += more[k];
    }
    layer.fair_ = tree().fair_shares(demand, layer.capacity_);
    for (auto& list : by_queue) sort_queue(list);
  }

  // The order within a queue: priority, then the policy's rank (ties: the caller's order).
  [[nodiscard]] bool first(std::size_t a, std::size_t b) const {
    const JobState& x = jobs[a];
    const JobState& y = jobs[b];
    if (x.spec->priority != y.spec->priority) return x.spec->priority > y.spec->priority;
    if (x.rank != y.rank) return x.rank < y.rank;
    return x.seq < y.seq;
  }
  void sort_queue(std::vector<std::size_t>& list) const {
    const auto in_order = [this](std::size_t a, std::size_t b) { return first(a, b); };
    // Callers often keep their jobs in order already (by submission): no sort then.
    if (!std::is_sorted(list.begin(), list.end(), in_order)) {
      std::stable_sort(list.begin(), list.end(), in_order);
    }
  }

  // A job's outcome starts the round empty; its request and the replicas it should have.
  void init(std::size_t j) {
    JobState& s = jobs[j];
    s.changed = false;
    s.selected = true;
    s.waiting = WaitReason::kNone;
    s.preempted.reset();
    s.why.clear();
    replica[j] = request_of(s.spec->replica);
    if (by_model) {
      model[j] = kUndecided;
      if (s.spec->replica.gpu_count > 0 && s.spec->replica.gpu_milli > 0) {
        if (!s.placements.empty()) {
          set_model(j, model_of_node(s.placements.front().node));
        } else if (options.sized && s.sized_model != kUndecided) {
          set_model(j, s.sized_model);  // where the sizing counted it
        } else if (const auto f = flavors(j); f.size() == 1) {
          set_model(j, f.front());
        }
      }
    }
    const int lo = least(j);
    const int hi = std::max(lo, s.spec->max_replicas);
    if (options.sized) {
      target[j] = s.wanted <= 0 ? 0 : std::clamp(s.wanted, lo, hi);
    } else {
      target[j] = s.spec->elastic() ? std::clamp(s.wanted > 0 ? s.wanted : hi, lo, hi) : lo;
    }
  }

  // A waiting job the caller left out joins the round: its index.
  std::size_t join(JobState* s) {
    const std::size_t j = jobs.size();
    jobs.add(s);
    replica.emplace_back();
    target.emplace_back();
    if (by_model) model.emplace_back(kUndecided);
    init(j);
    return j;
  }

  // Waiting jobs the caller left out join the round (their demand was in unlisted_demand, so
  // the fair shares stay); each queue's walk takes them in its order.
  void add(std::span<JobState* const> more) {
    std::vector<std::size_t> had(tree().size(), SIZE_MAX);  // per queue: its jobs before
    for (JobState* s : more) {
      const std::size_t j = join(s);
      auto& list = by_queue[s->queue];
      if (had[s->queue] == SIZE_MAX) had[s->queue] = list.size();
      list.push_back(j);
    }
    const auto in_order = [this](std::size_t a, std::size_t b) { return first(a, b); };
    for (std::size_t q = 0; q < had.size(); ++q) {
      if (had[q] == SIZE_MAX) continue;
      auto& list = by_queue[q];
      const auto mid = list.begin() + std::ptrdiff_t(had[q]);
      std::sort(mid, list.end(), in_order);  // no ties: the caller's ranks are distinct
      std::inplace_merge(list.begin(), mid, list.end(), in_order);
    }
  }

  // What the jobs a queue's order ranks first may take (action 2).
  [[nodiscard]] Amounts budget(std::size_t q) const {
    Amounts b{};
    for (std::size_t k = 0; k < kinds; ++k) {
      b[k] = std::max(layer.fair_[q][k], layer.allocated_[q][k]);
    }
    return b;
  }

  void add_to_order() {
    const std::size_t nq = tree().size();
    std::vector<Amounts> budgets(nq, Amounts{});
    std::vector<const JobState*> walk;
    walk.reserve(jobs.size());
    std::vector<std::size_t> from(nq + 1, 0);
    for (std::size_t q = 0; q < nq; ++q) {
      from[q] = walk.size();
      if (!tree().leaf(q)) continue;
      budgets[q] = budget(q);
      for (const std::size_t j : by_queue[q]) walk.push_back(&jobs[j]);
    }
    from[nq] = walk.size();
    std::vector<JobState*> more;
    options.more_to_order(OrderStart{budgets, walk, from}, more);
    add(more);
  }

  // Without an order (sjf's round): every left-out job that could start on what is free.
  void add_to_allocate() {
    std::vector<JobState*> more;
    options.more_to_allocate(OverShareStart{free, tree().leaves()}, more);
    add(more);
  }

  // Jobs added for the pass over the share: the order left them out, as it would have.
  void add_over_share() {
    std::vector<std::size_t> open;
    for (const std::size_t q : tree().leaves()) {
      if (layer.fair_[q][0] + kEps < layer.capacity_[0]) open.push_back(q);
    }
    if (open.empty()) return;
    std::vector<JobState*> more;
    options.more_over_share(OverShareStart{free, open}, more);
    const std::size_t from = jobs.size();
    add(more);
    for (std::size_t j = from; j < jobs.size(); ++j) {
      jobs[j].selected = false;
      wait(j, WaitReason::kLowerPriority,
           "queue {}'s share goes to the jobs its policy ranks first",
           tree().spec(jobs[j].queue).name);
    }
  }

  // 1. Elastic jobs above what the policy wants now give back the difference.
  void resize() {
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      JobState& s = jobs[j];
      // A job that may not be preempted keeps what it runs, whatever the policy wants.
      if (!s.spec->preemptible) continue;
      // The sizing may also have moved it to another GPU model (RoundOptions::sized).
      const bool moved = by_model && options.sized && s.sized_model != kUndecided &&
                         s.replicas() > 0 && s.sized_model != model[j];
      if (options.repack && s.spec->elastic() && target[j] > 0 && s.replicas() > 0 &&
          (target[j] != s.replicas() || moved)) {
        release(j, s.replicas());  // allocate starts it again at its new size
        if (moved) set_model(j, s.sized_model);
        ++stats.shrunk;
        continue;
      }
      const int extra = s.replicas() - target[j];
      if (extra <= 0 || s.replicas() == 0) continue;
      if (target[j] == 0 && options.sized) {
        release(j, extra);
        s.preempted = PreemptReason::kResized;
        if (options.explain) s.why = "its policy gives its GPUs to jobs it values more per GPU";
        ++stats.preempted;
      } else if (s.spec->elastic()) {
        release(j, extra);
        s.running_since = options.now;  // a resized job restarts
        ++stats.shrunk;
      }
    }
  }

  // 2. Least-attained-service style: in each queue the jobs ranked first get its share (or what
  // it holds, if more), the running ones ranked after them give it up.
  std::vector<bool> by_rank() {
    std::vector<bool> selected(jobs.size(), true);
    if (options.sized) {
      for (std::size_t j = 0; j < jobs.size(); ++j) {
        selected[j] = target[j] > 0;
        jobs[j].selected = selected[j];
        if (!selected[j]) {
          wait(j, WaitReason::kLowerPriority,
               "its queue's policy gives the GPUs to jobs it values more per GPU");
        }
      }
      return selected;
    }
    if (!options.preempt_by_rank) return selected;
    if (options.over_quota_by_rank) return by_rank_across_queues();
    for (const std::size_t q : tree().leaves()) {
      Amounts budget = this->budget(q);
      auto take = [&](std::size_t j) {
        const Amounts need =
            to_amounts(replica[j] * (jobs[j].replicas() > 0 ? jobs[j].replicas() : target[j]));
        for (std::size_t k = 0; k < kinds; ++k) {
          if (need[k] > budget[k] + kEps) return false;
        }
        for (std::size_t k = 0; k < kinds; ++k) budget[k] -= need[k];
        return true;
      };
      for (const std::size_t j : by_queue[q]) {
        if (jobs[j].replicas() > 0 && !jobs[j].spec->preemptible) take(j);
      }
      std::size_t first_left_out = SIZE_MAX;
      for (const std::size_t j : by_queue[q]) {
        if (jobs[j].replicas() > 0 && !jobs[j].spec->preemptible) continue;
        selected[j] = take(j);
        jobs[j].selected = selected[j];
        if (selected[j]) continue;
        if (first_left_out == SIZE_MAX) first_left_out = j;
        if (jobs[j].replicas() > 0) {
          release(j, jobs[j].replicas());
          jobs[j].preempted = PreemptReason::kQueueOrder;
          jobs[j].why =
              fmt::format("jobs ranked before it in queue {} need its share", tree().spec(q).name);
          ++stats.preempted;
        }
        wait(j, WaitReason::kLowerPriority,
             "queue {}'s share goes to the jobs its policy ranks first", tree().spec(q).name);
      }
    }
    return selected;
  }

  // Where the walk over a queue's waiting jobs (allocate) failed between two starts: the jobs
  // strictly between `after` and `before` in the queue's order (nullptr: its first, its last)
  // failed there, without changing anything, and were post-filter candidates in that order:
  // the listed ones are needs_preemption[begin, end), the left-out ones the caller gives back
  // (RoundOptions::next_candidate). What the queue and its parents had left of their limits
  // then: a job that would have passed them was no candidate (kOverLimit).
  struct Segment {
    std::size_t queue = 0;
    const JobState* after = nullptr;
    const JobState* before = nullptr;
    std::size_t begin = 0, end = 0;
    Amounts limit_room{};
  };
  bool candidates_left_out = false;  // set for the round's first pass, with next_candidate
  std::vector<Segment> segments;

  [[nodiscard]] Amounts limit_room(std::size_t q) const {
    Amounts room;
    room.fill(std::numeric_limits<double>::infinity());
    for (int at = int(q); at >= 0; at = tree().parent(std::size_t(at))) {
      const auto& limit = tree().limit(std::size_t(at));
      for (std::size_t k = 0; k < kinds; ++k) {
        room[k] = std::min(room[k], limit[k] - layer.allocated_[std::size_t(at)][k]);
      }
    }
    return room;
  }

  // 2, with RoundOptions::over_quota_by_rank: in each queue the jobs its order ranks first get
  // what the queue is guaranteed (its quota, as far as its jobs want it); what is left of the
  // cluster goes to the jobs left over, every queue's together, in the policy's order (higher
  // queue priority first, then the job's priority and rank), each queue within its limits. A
  // running job outside both is preempted (queue-order).
  std::vector<bool> by_rank_across_queues() {
    std::vector<bool> selected(jobs.size(), false);
    Amounts left = layer.capacity_;
    std::vector<Amounts> used(tree().size(), Amounts{});  // taken per queue, for the limits
    // Resources no queue has a quota of are not divided by quota: only the cluster bounds them.
    Amounts quoted{};
    for (const std::size_t q : tree().leaves()) {
      for (std::size_t k = 0; k < kinds; ++k) quoted[k] += tree().quota(q)[k];
    }
    const auto need_of = [&](std::size_t j) {
      return to_amounts(replica[j] * (jobs[j].replicas() > 0 ? jobs[j].replicas() : target[j]));
    };
    const auto charge_taken = [&](std::size_t q, const Amounts& need, Amounts* budget) {
      for (std::size_t k = 0; k < kinds; ++k) {
        left[k] -= need[k];
        if (budget != nullptr) (*budget)[k] -= need[k];
      }
      for (int at = int(q); at >= 0; at = tree().parent(std::size_t(at))) {
        for (std::size_t k = 0; k < kinds; ++k) used[std::size_t(at)][k] += need[k];
      }
    };
    const auto take = [&](std::size_t j, Amounts* budget) {
      const Amounts need = need_of(j);
      for (std::size_t k = 0; k < kinds; ++k) {
        if (need[k] > left[k] + kEps) return false;
        if (budget != nullptr && need[k] > (*budget)[k] + kEps) return false;
      }
      for (int at = int(jobs[j].queue); at >= 0; at = tree().parent(std::size_t(at))) {
        for (std::size_t k = 0; k < kinds; ++k) {
          if (used[std::size_t(at)][k] + need[k] > tree().limit(std::size_t(at))[k] + kEps) {
            return false;
          }
        }
      }
      charge_taken(jobs[j].queue, need, budget);
      return true;
    };
    const auto fixed = [&](std::size_t j) {
      return jobs[j].replicas() > 0 && !jobs[j].spec->preemptible;
    };
    std::vector<std::size_t> rest;
    for (const std::size_t q : tree().leaves()) {
      Amounts guaranteed{};
      for (std::size_t k = 0; k < kinds; ++k) {
        guaranteed[k] = quoted[k] <= kEps ? std::numeric_limits<double>::infinity()
                                          : std::min(tree().quota(q)[k], demand[q][k]);
      }
      for (const std::size_t j : by_queue[q]) {
        if (!fixed(j)) continue;
        selected[j] = true;  // it keeps what it runs, first from its queue's guarantee
        charge_taken(q, need_of(j), &guaranteed);
      }
      for (const std::size_t j : by_queue[q]) {
        if (fixed(j)) continue;
        selected[j] = take(j, &guaranteed);
        if (!selected[j]) rest.push_back(j);
      }
    }
    // Over quota: one order across the queues (each queue's list is in its order already).
    std::stable_sort(rest.begin(), rest.end(), [&](std::size_t a, std::size_t b) {
      const int pa = tree().spec(jobs[a].queue).priority, pb = tree().spec(jobs[b].queue).priority;
      if (pa != pb) return pa > pb;
      return first(a, b);
    });
    for (const std::size_t j : rest) selected[j] = take(j, nullptr);
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      jobs[j].selected = selected[j];
      if (selected[j]) continue;
      if (jobs[j].replicas() > 0) {
        release(j, jobs[j].replicas());
        jobs[j].preempted = PreemptReason::kQueueOrder;
        if (options.explain) {
          jobs[j].why = "jobs ranked before it take its queue's quota and what is over quota";
        }
        ++stats.preempted;
      }
      wait(j, WaitReason::kLowerPriority,
           "its queue's quota and the GPUs over quota go to jobs its policy ranks first");
    }
    return selected;
  }

  // 3. Waiting jobs start on free resources, the queue furthest below its fair share first.
  // Returns the jobs that could start only by preempting, in the order they were considered.
  std::vector<std::size_t> allocate(const std::vector<bool>& selected) {
    std::vector<std::size_t> cursor(tree().size(), 0);
    std::vector<std::size_t> blocked_by(tree().size(), SIZE_MAX);
    using Entry = std::tuple<int, double, std::size_t>;  // -priority, share, queue
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> order;
    auto next_waiting = [&](std::size_t q) {
      auto& c = cursor[q];
      while (c < by_queue[q].size()) {
        const std::size_t j = by_queue[q][c];
        if (jobs[j].replicas() == 0 && selected[j]) return true;
        ++c;
      }
      return false;
    };
    // With left-out jobs (candidates_left_out), every queue may hold some: it is in the order
    // until its walk has passed them all (a walk over none changes nothing).
    const bool left_out = candidates_left_out;
    for (const std::size_t q : tree().leaves()) {
      if (next_waiting(q) || left_out) order.emplace(-tree().spec(q).priority, ratio(q), q);
    }
    std::vector<std::size_t> needs_preemption;
    std::vector<std::size_t> open(left_out ? tree().size() : 0, SIZE_MAX);
    std::vector<const JobState*> last_start(open.size(), nullptr);
    const auto close = [&](std::size_t q, const JobState* at) {
      segments[open[q]].before = at;
      segments[open[q]].end = needs_preemption.size();
      open[q] = SIZE_MAX;
    };
    while (!order.empty()) {
      const std::size_t q = std::get<2>(order.top());
      order.pop();
      if (left_out) {
        if (open[q] == SIZE_MAX) {
          open[q] = segments.size();
          segments.push_back(
              {q, last_start[q], nullptr, needs_preemption.size(), 0, limit_room(q)});
        }
        if (!next_waiting(q)) {  // only left-out jobs may follow: none starts (free only shrinks)
          close(q, nullptr);
          continue;
        }
      }
      const std::size_t j = by_queue[q][cursor[q]++];
      const bool started = try_start(j, needs_preemption);
      if (!started && !options.backfill) {
        blocked_by[q] = j;
        continue;  // the rest of the queue waits behind it (below), out of the order
      }
      if (left_out && started) {
        close(q, &jobs[j]);
        last_start[q] = &jobs[j];
        order.emplace(-tree().spec(q).priority, ratio(q), q);
        continue;
      }
      if (next_waiting(q)) {
        order.emplace(-tree().spec(q).priority, ratio(q), q);
      } else if (left_out) {
        close(q, nullptr);
      }
    }
    for (const std::size_t q : tree().leaves()) {
      if (blocked_by[q] == SIZE_MAX) continue;
      while (next_waiting(q)) {
        wait(by_queue[q][cursor[q]++], WaitReason::kLowerPriority,
             "behind {} in queue {} (first in, first out)", jobs[blocked_by[q]].spec->name,
             tree().spec(q).name);
      }
    }
    return needs_preemption;
  }

  bool try_start(std::size_t j, std::vector<std::size_t>& needs_preemption) {
    if (!by_model || model[j] != kUndecided) {
      const Try t = try_start_as(j);
      if (t == Try::kNeedsRoom) needs_preemption.push_back(j);
      return t == Try::kStarted;
    }
    // Kueue's flavor assignment with fungibility {whenCanBorrow: TryNextFlavor, whenCanPreempt:
    // TryNextFlavor}: each model in order where its queue stays within its fair share, the first
    // where the job starts; then the others in order (over the share, reclaimable: borrowing);
    // failing that, the first where taking resources back could start it (reclaim or preemption
    // then free that model only); failing that, the first model's reason.
    std::optional<std::pair<std::size_t, std::pair<WaitReason, std::string>>> first, room;
    const std::vector<std::size_t> models = flavors(j);
    std::vector<bool> tried(models.size(), false);
    for (const bool within_share : {true, false}) {
      for (std::size_t i = 0; i < models.size(); ++i) {
        if (tried[i]) continue;
        set_model(j, models[i]);
        if (within_share && ratio(jobs[j].queue, replica[j] * least(j)) > 1 + kEps) continue;
        tried[i] = true;
        const Try t = try_start_as(j);
        if (t == Try::kStarted) return true;
        auto reason = std::make_pair(jobs[j].waiting, jobs[j].why);
        if (t == Try::kNeedsRoom && !room) room.emplace(models[i], reason);
        if (!first) first.emplace(models[i], std::move(reason));
      }
    }
    const auto& chosen = room ? room : first;
    if (!chosen) {  // it accepts no model of the cluster: the placer says why
      const Try t = try_start_as(j);
      if (t == Try::kNeedsRoom) needs_preemption.push_back(j);
      return t == Try::kStarted;
    }
    set_model(j, chosen->first);
    jobs[j].waiting = chosen->second.first;
    jobs[j].why = chosen->second.second;
    if (room) needs_preemption.push_back(j);
    return false;
  }

  enum class Try : std::uint8_t { kStarted, kNeedsRoom, kNo };

  // Starts j at its target or its least size on what is free, or says why not.
  Try try_start_as(std::size_t j) {
    const std::size_t q = jobs[j].queue;
    const int lo = least(j);
    for (int n = target[j];; n = lo) {
      const Resources need = replica[j] * n;
      if (const auto passed = limit_passed(q, need)) {
        if (n == lo) {
          if (*passed >= kFirstModelSlot) {
            wait(j, WaitReason::kOverLimit, "queue {} (or a parent) would pass its limit of {}",
                 tree().spec(q).name, kind_name(*passed));
          } else {
            wait(j, WaitReason::kOverLimit, "queue {} (or a parent) would pass its limit",
                 tree().spec(q).name);
          }
          return Try::kNo;
        }
        continue;
      }
      if (!fits_free(need)) {
        if (n > lo) continue;
        wait_for_resources(j, need);
        return jobs[j].waiting != WaitReason::kInfeasible ? Try::kNeedsRoom : Try::kNo;
      }
      PlacementFailure why;
      why.explain = options.explain;
      if (place(j, n, &why)) {
        ++stats.started;
        return Try::kStarted;
      }
      if (n == lo) {
        const bool never = why.infeasible || beyond_capacity(need);
        wait(j, never ? WaitReason::kInfeasible : WaitReason::kFragmented, "{}", why.message);
        return never ? Try::kNo : Try::kNeedsRoom;
      }
    }
  }

  // A running job's replicas a preemption may take, cheapest first.
  struct Victim {
    std::size_t job = 0;
    int replicas = 0;  // taken from its end
    bool surplus = false;
    double gpu_hours_lost = 0;
  };

  // Whether a victim entry can no longer free anything this round: its job stopped, or its
  // surplus is gone.
  [[nodiscard, gnu::always_inline]] bool spent(const Victim& v) const {
    const JobState& s = jobs[v.job];
    return s.replicas() == 0 || (v.surplus && s.replicas() <= least(v.job));
  }

  // 4 and 5. Frees exactly what `j` needs from `pool` (sorted victims) and starts it; or changes
  // nothing. `allowed(v)` says whether victim v may still go, given what is taken so far. Spent
  // entries are dropped from the pool as they are met, so a round's walks stay short.
  template <typename Allowed>
  bool preempt_for(std::size_t j, std::vector<Victim>& pool, PreemptReason reason,
                   std::vector<sched::Victim>& out, Allowed allowed) {
    const int n = least(j);
    const Resources need = replica[j] * n;
    struct Taken {
      Victim v;
      std::vector<cluster::Placement> placements;
    };
    std::vector<Taken> taken;
    bool started = false;
    double freed = 0;
    std::size_t spent_seen = 0;
    for (const Victim& v : pool) {
      if (spent(v)) {
        ++spent_seen;
        continue;
      }
      // A victim on another GPU model frees nothing this job may take.
      if (by_model && model[j] != kUndecided && model[v.job] != model[j]) continue;
      if (!allowed(v)) continue;
      Taken t{v, {}};
      auto& ps = jobs[v.job].placements;
      // A whole-job victim takes whatever the job still runs (its surplus may have been spared).
      t.v.replicas =
          v.surplus ? std::min(v.replicas, jobs[v.job].replicas()) : jobs[v.job].replicas();
      if (t.v.replicas == 0) continue;
      t.placements.assign(ps.end() - t.v.replicas, ps.end());
      release(v.job, t.v.replicas);
      freed += double(replica[v.job].gpu_milli() * t.v.replicas);
      taken.push_back(std::move(t));
      if (!fits_free(need)) continue;
      if (place(j, n, nullptr)) {
        started = true;
        break;
      }
      // Past several times what it needs, more victims will not make a placement appear (the
      // free GPUs are scattered): give up rather than walk every running job.
      if (freed > 4.0 * double(need.gpu_milli()) + 8000.0) break;
    }
    // Undo what was not needed, latest first: all of it when the job still cannot start.
    for (auto it = taken.rbegin(); it != taken.rend(); ++it) {
      const bool fits = std::all_of(it->placements.begin(), it->placements.end(),
                                    [&](const auto& p) { return placement_fits(cluster(), p); });
      if (!started || fits) {
        for (auto& p : it->placements) {
          cluster().apply(p);
          jobs[it->v.job].placements.push_back(std::move(p));
          hold(jobs[it->v.job].queue, replica[it->v.job], +1);
        }
        it->v.replicas = 0;
      }
    }
    if (spent_seen > pool.size() / 4) {
      std::erase_if(pool, [&](const Victim& v) { return spent(v); });
    }
    if (!started) return false;
    ++stats.started;
    jobs[j].waiting = WaitReason::kNone;
    jobs[j].why.clear();
    for (const Taken& t : taken) {
      if (t.v.replicas == 0) continue;
      out.push_back({t.v.job, static_cast<std::uint32_t>(t.v.replicas), std::nullopt});
      JobState& victim = jobs[t.v.job];
      victim.preempted = reason;
      if (options.explain)
        victim.why = fmt::format("{} for {} of queue {}", preempt_key(reason), jobs[j].spec->name,
                                 tree().spec(jobs[j].queue).name);
      if (victim.replicas() > 0) victim.running_since = options.now;  // shrunk: restarts
      ++stats.preempted;
    }
    return true;
  }

  std::vector<Victim> victims(const std::function<bool(std::size_t)>& eligible) {
    std::vector<Victim> pool;
    for (std::size_t v = 0; v < jobs.size(); ++v) {
      const JobState& s = jobs[v];
      if (s.replicas() == 0 || !s.spec->preemptible || !eligible(v)) continue;
      const double hours = double(replica[v].gpu_milli()) / 1000.0 *
                           double(std::max<std::int64_t>(0, options.now - s.running_since)) /
                           3600.0;
      const int lo = least(v);
      // Replicas above min one at a time, before any whole job.
      for (int r = s.replicas(); r > lo && s.spec->elastic(); --r) {
        pool.push_back({v, 1, true, hours});
      }
      pool.push_back({v, s.replicas(), false, hours * s.replicas()});
    }
    std::stable_sort(pool.begin(), pool.end(), [&](const Victim& a, const Victim& b) {
      const int pa = jobs[a.job].spec->priority, pb = jobs[b.job].spec->priority;
      if (pa != pb) return pa < pb;
      if (a.surplus != b.surplus) return a.surplus;
      if (a.gpu_hours_lost != b.gpu_hours_lost) return a.gpu_hours_lost < b.gpu_hours_lost;
      if (jobs[a.job].rank != jobs[b.job].rank) return jobs[a.job].rank > jobs[b.job].rank;
      return jobs[a.job].seq < jobs[b.job].seq;
    });
    return pool;
  }

  // GPUs (milli; of one model for its slot k) queues other than `q` hold above their fair share:
  // all a reclaim could take.
  [[nodiscard]] double reclaimable(std::size_t q, std::size_t k = 0) const {
    double over = 0;
    for (const std::size_t r : tree().leaves()) {
      if (r != q) over += std::max(0.0, layer.allocated_[r][k] - layer.fair_[r][k]);
    }
    return over;
  }

  // 4 and 5, as the layer's post-filters: per job that found no room, reclaim, then priority
  // preemption, then any post-filter added after them, until one makes room.
  std::optional<std::vector<Victim>> over_share;              // built once, when first needed
  std::map<std::size_t, std::vector<Victim>> lower_priority;  // per queue, when needed
  std::vector<int> lowest;  // per queue: the lowest priority of a job that could be a victim

  bool reclaim(std::size_t j, std::vector<sched::Victim>& out) {
    const std::size_t q = jobs[j].queue;
    const Resources need = replica[j] * least(j);
    const double mine = ratio(q, need);
    // Only within its fair share, only from queues above theirs, and never so far that the
    // victim's queue ends below the share this queue reaches (no reclaim loops).
    if (mine > 1 + kEps || free[0] + reclaimable(q) < double(need.gpu_milli()) - kEps) {
      return false;
    }
    if (by_model && model[j] >= kFirstModelSlot && model[j] < kResourceKinds &&
        free[model[j]] + reclaimable(q, model[j]) < double(need.v[model[j]]) - kEps) {
      return false;
    }
    if (!over_share) {
      over_share = victims([&](std::size_t v) { return ratio(jobs[v].queue) > 1 + kEps; });
    }
    return preempt_for(j, *over_share, PreemptReason::kReclaim, out, [&](const Victim& v) {
      const std::size_t r = jobs[v.job].queue;
      const Resources gone = replica[v.job] * v.replicas;
      return r != q && ratio(r, Resources{} - gone) >= mine - kEps;
    });
  }

  bool preempt_lower(std::size_t j, std::vector<sched::Victim>& out) {
    const std::size_t q = jobs[j].queue;
    if (jobs[j].spec->priority <= lowest[q]) return false;
    auto [pool, fresh] = lower_priority.try_emplace(q);
    if (fresh) pool->second = victims([&](std::size_t v) { return jobs[v].queue == q; });
    return preempt_for(j, pool->second, PreemptReason::kPriority, out, [&](const Victim& v) {
      return jobs[v.job].spec->priority < jobs[j].spec->priority;
    });
  }

  // What a post-filter other than the built-in ones did: it bound the job's replicas and
  // released its victims' last replicas in the cluster; the states follow.
  void record(std::size_t j, PostFilterResult& r) {
    for (const sched::Victim& v : r.victims) {
      if (v.id >= jobs.size()) continue;
      JobState& victim = jobs[v.id];
      const int n = v.replicas == 0
                        ? victim.replicas()
                        : std::min<int>(static_cast<int>(v.replicas), victim.replicas());
      for (int i = 0; i < n; ++i) {
        victim.placements.pop_back();
        hold(victim.queue, replica[v.id], -1);
      }
      victim.changed = true;
      victim.preempted = PreemptReason::kPostFilter;
      if (options.explain) victim.why = fmt::format("{}: {}", r.reason, r.message);
      if (victim.replicas() > 0) victim.running_since = options.now;
      ++stats.preempted;
    }
    failed.clear();
    JobState& s = jobs[j];
    for (auto& p : r.placements) {
      s.placements.push_back(std::move(p));
      hold(s.queue, replica[j], +1);
    }
    if (s.replicas() == 0) return;
    s.running_since = options.now;
    s.changed = true;
    s.waiting = WaitReason::kNone;
    s.why.clear();
    ++stats.started;
  }

  void reclaim_and_preempt(const std::vector<std::size_t>& candidates) {
    lowest.assign(tree().size(), std::numeric_limits<int>::max());
    for (std::size_t v = 0; v < jobs.size(); ++v) {
      if (jobs[v].replicas() > 0 && jobs[v].spec->preemptible) {
        lowest[jobs[v].queue] = std::min(lowest[jobs[v].queue], jobs[v].spec->priority);
      }
    }
    // The built-in post-filters act on this round only (and never after it, even on a throw).
    struct Unset {
      JobLayer& layer;
      ~Unset() {
        layer.reclaim_->set(nullptr);
        layer.priority_->set(nullptr);
      }
    } unset{layer};
    layer.reclaim_->set(
        [this](std::size_t j, std::vector<sched::Victim>& out) { return reclaim(j, out); });
    layer.priority_->set(
        [this](std::size_t j, std::vector<sched::Victim>& out) { return preempt_lower(j, out); });
    if (candidates_left_out) {
      with_left_out(candidates);
      return;
    }
    for (const std::size_t j : candidates) post_filter(j);
  }

  Decision waiting;  // a candidate's failure: it fits some empty node (none is infeasible)

  // Runs the post-filters for waiting job j: whether one made room.
  bool post_filter(std::size_t j) {
    if (jobs[j].replicas() > 0) return false;
    if (by_model && model[j] == kUndecided) {  // joined after the walk: its first model
      if (const auto f = flavors(j); !f.empty()) set_model(j, f.front());
    }
    const PodRequest request = layer.resolver_.resolve(jobs[j].spec->replica);
    const PostFilterArgs args{j, request, static_cast<std::uint32_t>(least(j)), waiting};
    PostFilterResult r = layer.post_filters_.run(args);
    if (r.success() && jobs[j].replicas() == 0) record(j, r);
    return r.success();
  }

  // The post-filters over the candidates and, at their places in each walk's segment, the
  // left-out jobs the caller gives back (RoundOptions::next_candidate): the same runs, in the
  // same order, as over every job, skipping only those that cannot change anything. A plain gang
  // whose reclaim failed fails again while nothing has changed (the same queue, share, victims
  // and cluster), so the caller is told to skip its shape until a post-filter makes room.
  void with_left_out(const std::vector<std::size_t>& candidates) {
    const bool any = layer.post_filters_.names().size() > 2;  // added ones: no bound known
    std::uint64_t changes = 0;
    std::vector<std::uint64_t> failed_at(tree().size(), 0);
    std::vector<std::vector<std::pair<Resources, int>>> failed_gangs(tree().size());
    for (const Segment& seg : segments) {
      const std::size_t q = seg.queue;
      const JobState* at = seg.after;
      for (std::size_t i = seg.begin;;) {
        const bool listed_left = i < seg.end;
        if (failed_at[q] != changes) failed_gangs[q].clear();
        CandidateQuery query;
        query.queue = q;
        query.after = at;
        query.before = listed_left ? &jobs[candidates[i]] : seg.before;
        query.room = reclaim_room(q);
        query.priority_above = lowest[q];
        query.any = any;
        query.failed = failed_gangs[q];
        std::size_t j = 0;
        if (JobState* more = options.next_candidate(query)) {
          // As its try in the walk ended: over the limit left then, or short of free resources.
          j = join(more);
          at = more;
          const Resources need = replica[j] * least(j);
          if (!fits(need, seg.limit_room)) {
            wait(j, WaitReason::kOverLimit, "queue {} (or a parent) would pass its limit",
                 tree().spec(q).name);
            continue;
          }
          wait_for_resources(j, need);
          if (jobs[j].waiting == WaitReason::kInfeasible) continue;
        } else if (listed_left) {
          j = candidates[i++];
          at = &jobs[j];
        } else {
          break;
        }
        if (post_filter(j)) {
          ++changes;
        } else if (!any && plain(*jobs[j].spec) && jobs[j].spec->priority <= lowest[q]) {
          failed_at[q] = changes;
          failed_gangs[q].emplace_back(replica[j], least(j));
        }
      }
    }
  }

  [[nodiscard]] bool plain(const workload::JobSpec& spec) const {
    return !by_model && spec.replica.allowed_models.empty() &&
           spec.replica.constraints == workload::NodeConstraints{} && spec.topology_levels.empty();
  }

  [[nodiscard]] bool fits(const Resources& need, const Amounts& room) const {
    for (std::size_t k = 0; k < kinds; ++k) {
      if (double(need.v[k]) > room[k] + kEps) return false;
    }
    return true;
  }

  // What a job of queue q may ask for and still pass reclaim's first test now: its queue within
  // its fair share after it, and no more than is free or held over their shares by the others.
  [[nodiscard]] Amounts reclaim_room(std::size_t q) const {
    Amounts room{};
    for (std::size_t k = 0; k < kinds; ++k) {
      const double fair = layer.fair_[q][k];
      room[k] = (fair <= kEps ? kEps : fair * (1 + kEps)) - layer.allocated_[q][k];
    }
    room[0] = std::min(room[0], free[0] + reclaimable(q) + kEps);
    for (std::size_t k = kFirstModelSlot; by_model && k < kinds; ++k) {
      room[k] = std::min(room[k], free[k] + reclaimable(q, k) + kEps);
    }
    return room;
  }

  // 6. Elastic jobs below what the policy wants grow next to their replicas on what is free.
  void grow() {
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      JobState& s = jobs[j];
      if (!s.spec->elastic() || s.replicas() == 0 || s.replicas() >= target[j]) continue;
      int n = target[j] - s.replicas();
      while (n > 0 && !(within_limit(s.queue, replica[j] * n) && fits_free(replica[j] * n))) {
        --n;
      }
      for (; n > 0; n /= 2) {
        if (place(j, n, nullptr)) {
          ++stats.grown;
          s.running_since = options.now;  // a resized job restarts
          break;
        }
      }
    }
  }
};

namespace {

bool layer_fair_below_capacity(const JobLayer& layer, std::size_t q) {
  return layer.fair_shares()[q][0] + kEps < layer.capacity()[0];
}

}  // namespace

RoundStats JobLayer::round(std::span<JobState* const> jobs, const RoundOptions& options) {
  // Its selection across the queues has no per-queue budget a WaitingIndex could bound.
  if (options.over_quota_by_rank && (options.more_to_order || options.more_over_share)) {
    throw std::invalid_argument("over_quota_by_rank needs every waiting job in the round");
  }
  Round r(*this, jobs, options);
  r.setup();
  r.resize();
  const bool lazy = options.preempt_by_rank && !options.sized;
  if (lazy && options.more_to_order) r.add_to_order();
  r.candidates_left_out = !options.preempt_by_rank && !options.sized && options.backfill &&
                          options.next_candidate && options.more_to_allocate;
  if (r.candidates_left_out) r.add_to_allocate();
  const auto selected = r.by_rank();
  const auto candidates = r.allocate(selected);
  if (!options.sized && options.preempt) r.reclaim_and_preempt(candidates);
  // What the order left out of a queue's share may still run on what nobody wants, over the
  // share (and the first to give it back); not in a queue whose share is the whole cluster,
  // where the order alone decides (Tiresias's count budget).
  if (options.preempt_by_rank) {
    if (lazy && options.more_over_share) r.add_over_share();
    std::vector<bool> over_share(r.jobs.size(), false);
    for (std::size_t j = 0; j < r.jobs.size(); ++j) {
      const std::size_t q = r.jobs[j].queue;
      over_share[j] = !(j < selected.size() && selected[j]) && r.jobs[j].replicas() == 0 &&
                      layer_fair_below_capacity(*this, q);
    }
    if (std::find(over_share.begin(), over_share.end(), true) != over_share.end()) {
      r.allocate(over_share);
    }
  }
  r.grow();
  for (std::size_t j = 0; j < r.jobs.size(); ++j) {
    if (r.jobs[j].replicas() == 0) ++r.stats.waiting;
  }
  return r.stats;
}

RoundStats JobLayer::round(std::span<JobState> jobs, const RoundOptions& options) {
  std::vector<JobState*> refs;
  refs.reserve(jobs.size());
  for (JobState& s : jobs) refs.push_back(&s);
  return round(refs, options);
}

}  // namespace gpuorch::sched::jobs

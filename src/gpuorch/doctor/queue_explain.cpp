// Each waiting job is admitted on the cluster as it is now and undone before the next (its
// reservation released, its victims restored), so every verdict is asked of the same state.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/printable.hpp"
#include "gpuorch/doctor/cluster_view.hpp"
#include "gpuorch/doctor/queue.hpp"
#include "gpuorch/k8s/mirror/cluster_queues.hpp"
#include "gpuorch/k8s/mirror/gang_check.hpp"
#include "gpuorch/sched/jobs/job_layer.hpp"

namespace gpuorch::doctor {
namespace {

using k8s::PodObject;
using sched::jobs::Amounts;
using sched::jobs::WaitReason;

std::string gpus(double milli) {
  if (!std::isfinite(milli)) return "none";
  return fmt::format("{:g}", milli / 1000.0);
}

std::string fix_for(WaitReason r) {
  switch (r) {
    case WaitReason::kOverLimit:
      return "the queue (or a parent) is at its limit: raise spec.resources.gpu.limit, or wait "
             "for its jobs to finish";
    case WaitReason::kOverQuota:
      return "the queue is past its fair share and nothing free is left over: raise its quota "
             "or overQuotaWeight, or wait for GPUs no queue within its quota wants";
    case WaitReason::kShareHeld:
      return "within its share, but what holds it cannot be taken back now (pods that are not "
             "preemptible, terminating or guarded by a PodDisruptionBudget, or --no-preemption)";
    case WaitReason::kLowerPriority:
      return "jobs of a higher priority, or earlier in the queue's order, come first";
    case WaitReason::kFragmented:
      return "enough is free in total but no node holds the job: `gpuorch doctor pod NS/NAME` "
             "shows which nodes lack what";
    case WaitReason::kInfeasible:
      return "no node holds it even when empty: correct the request, or add nodes that can";
    case WaitReason::kNone:
      break;
  }
  return "";
}

struct Job {
  std::string name;  // "ns/pod" or the gang "ns/group"
  std::vector<PodObject> members;
  std::size_t leaf = 0;
};

class QueueExplainer {
 public:
  QueueExplainer(const ClusterObjects& objects, const QueueOptions& options)
      : options_(options), view_(objects, options.mirror) {
    for (const auto& q : objects.queues) queues_.update(q, false);
  }

  std::vector<Finding> explain(const std::string& asked_name) {
    const auto& tree = queues_.tree();
    std::optional<std::size_t> asked;
    if (!asked_name.empty()) {
      asked = tree.find(asked_name);
      if (!asked) {
        std::vector<std::string> names;
        for (std::size_t q = 0; q < tree.size(); ++q) names.push_back(tree.spec(q).name);
        base::fail_input(fmt::format("queue '{}' not found (the cluster's queues: {})",
                                     base::printable(asked_name), fmt::join(names, ", ")));
      }
    }
    std::vector<Finding> out;
    if (!queues_.refused().empty()) {
      out.push_back({Severity::kError, "queue.refused", queues_.refused(), "the Queue objects",
                     "correct the Queue objects (kubectl get queues -o yaml)"});
    }
    std::vector<const PodObject*> bound, pending;
    for (const auto& p : view_.pods) {
      if (!p.node_name.empty()) {
        bound.push_back(&p);
      } else if (p.scheduler_name == options_.scheduler_name && !p.gated() && !p.deleting) {
        pending.push_back(&p);
      }
    }
    // Quotas per GPU model: a bound pod's GPUs are of its node's model.
    std::map<std::string, std::string> node_model;
    if (view_.ready()) {
      const cluster::Cluster& c = view_.mirror().cluster();
      for (cluster::NodeIndex n = 0; n < c.node_count(); ++n) {
        node_model[c.spec(n).name] = c.spec(n).gpu_model;
      }
    }
    const auto model_of = [&](const std::string& node) {
      const auto it = node_model.find(node);
      return it == node_model.end() ? std::string() : it->second;
    };
    const auto allocated = queues_.holdings(bound, &view_.dra(), model_of);
    auto requested = queues_.holdings(pending, &view_.dra(), model_of);
    for (std::size_t q = 0; q < requested.size(); ++q) requested[q] += allocated[q];
    const Amounts capacity =
        view_.ready() ? sched::jobs::cluster_capacity(view_.mirror().cluster(), &tree) : Amounts{};
    std::vector<Amounts> demand(tree.size());
    for (std::size_t q = 0; q < tree.size(); ++q) {
      for (std::size_t k = 0; k < sched::jobs::kResourceKinds; ++k) {
        demand[q][k] = double(requested[q].v[k]);
      }
    }
    const auto fair = tree.fair_shares(demand, capacity);
    // Whether queue q is `above` or under it.
    const auto under = [&](std::size_t q, std::size_t above) {
      for (int at = int(q); at >= 0; at = tree.parent(std::size_t(at))) {
        if (std::size_t(at) == above) return true;
      }
      return false;
    };
    const auto in_scope = [&](std::size_t q) { return !asked || under(q, *asked); };
    const auto jobs = waiting_jobs(pending, in_scope, out);
    for (std::size_t q = 0; q < tree.size(); ++q) {
      if (!in_scope(q)) continue;
      const auto& spec = tree.spec(q);
      const auto waiting =
          std::count_if(jobs.begin(), jobs.end(), [&](const Job& j) { return under(j.leaf, q); });
      out.push_back(
          {Severity::kInfo, "queue.state",
           fmt::format("queue {}{}: GPUs quota {}, limit {}, over-quota weight {:g}; fair share "
                       "now {}; allocated {}, requested {}; {} job(s) waiting",
                       spec.name, spec.parent.empty() ? "" : " (under " + spec.parent + ")",
                       gpus(tree.quota(q)[0]), gpus(tree.limit(q)[0]), spec.gpu.over_quota_weight,
                       gpus(fair[q][0]), gpus(double(allocated[q].v[0])),
                       gpus(double(requested[q].v[0])), waiting),
           fmt::format("priority {}; CPU allocated {} of fair share {} milli; memory allocated "
                       "{} of fair share {} MiB; cluster {} GPUs",
                       spec.priority, allocated[q].v[1], fair[q][1], allocated[q].v[2], fair[q][2],
                       gpus(capacity[0])),
           ""});
      for (const auto& m : spec.gpu_models) {
        const std::size_t k = *tree.model_slot(m.model);
        out.push_back(
            {Severity::kInfo, "queue.model",
             fmt::format("queue {}, GPUs of model {}: quota {}, limit {}, over-quota weight {:g}; "
                         "fair share now {}; allocated {}, requested {}",
                         spec.name, m.model, gpus(tree.quota(q)[k]), gpus(tree.limit(q)[k]),
                         m.gpu.over_quota_weight, gpus(fair[q][k]), gpus(double(allocated[q].v[k])),
                         gpus(double(requested[q].v[k]))),
             fmt::format("cluster {} GPUs of model {}", gpus(capacity[k]), m.model), ""});
      }
    }
    for (const Job& j : jobs) out.push_back(verdict(j));
    return out;
  }

 private:
  template <typename InScope>
  std::vector<Job> waiting_jobs(const std::vector<const PodObject*>& pending, InScope in_scope,
                                std::vector<Finding>& out) {
    std::map<std::string, Job> by_name;
    for (const PodObject* p : pending) {
      const auto leaf = queues_.leaf(p->queue);
      if (!leaf) {
        out.push_back({Severity::kWarning, "queue.missing",
                       fmt::format("{}: queue '{}' (label {}) is not a leaf Queue of the cluster",
                                   p->key(), base::printable(p->queue), k8s::kQueueLabel),
                       "the pod's label", "create the Queue, or correct the pod's label"});
        continue;
      }
      if (!in_scope(*leaf)) continue;
      const std::string name = p->gang.empty() ? p->key() : p->gang;
      Job& j = by_name[name];
      j.name = name;
      j.leaf = *leaf;
      j.members.push_back(*p);
    }
    std::vector<Job> jobs;
    for (auto& [name, j] : by_name) {
      std::sort(j.members.begin(), j.members.end(),
                [](const PodObject& a, const PodObject& b) { return a.key() < b.key(); });
      jobs.push_back(std::move(j));
    }
    // The scheduler's order: higher priority first, then the oldest.
    std::stable_sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) {
      const PodObject& x = a.members.front();
      const PodObject& y = b.members.front();
      if (x.priority != y.priority) return x.priority > y.priority;
      return x.created < y.created;
    });
    return jobs;
  }

  std::string evidence(const Job& j) const {
    const PodObject& p = j.members.front();
    return fmt::format("{} pending pod(s) of {} GPU{}, {} mCPU, {} MiB each; priority {}; queue {}",
                       j.members.size(), p.spec.gpu_count,
                       p.spec.gpu_share() ? fmt::format(" x {} milli", p.spec.gpu_milli) : "",
                       p.spec.cpu_milli, p.spec.memory_mib, p.priority,
                       queues_.tree().spec(j.leaf).name);
  }

  Finding verdict(const Job& j) {
    const std::string ev = evidence(j);
    if (!view_.ready()) {
      return {
          Severity::kError, "queue.no-cluster",
          fmt::format("{}: {}", j.name,
                      view_.build_error.empty() ? "the cluster has no node the scheduler can use"
                                                : view_.build_error),
          ev, "register nodes (kubelet) or fix the ones left out"};
    }
    const PodObject& first = j.members.front();
    if (!first.gang.empty()) {
      const auto g = view_.groups.find(first.gang);
      int bound = 0;
      for (const auto& p : view_.pods) bound += int(p.gang == first.gang && !p.node_name.empty());
      const k8s::GangCheck check = k8s::check_gang(
          first.gang, g == view_.groups.end() ? nullptr : &g->second, bound, j.members);
      if (check.hold == k8s::GangHold::kNoGroup || check.hold == k8s::GangHold::kIncomplete) {
        return {Severity::kWarning, "queue.gang-incomplete",
                fmt::format("{}: {}", j.name, check.message), ev,
                fmt::format("gpuorch doctor pod {}", first.key())};
      }
      if (check.hold != k8s::GangHold::kNone) {
        return {Severity::kError, "queue.infeasible", fmt::format("{}: {}", j.name, check.message),
                ev, fmt::format("gpuorch doctor pod {}", first.key())};
      }
    }
    for (const auto& m : j.members) {
      if (!m.error.empty() || !m.unevaluated.empty()) {
        return {Severity::kError, "queue.infeasible",
                fmt::format("{}: member {} cannot be placed: {}", j.name, m.key(),
                            m.error.empty() ? m.unevaluated : m.error),
                ev, fmt::format("gpuorch doctor pod {}", m.key())};
      }
    }
    k8s::ClusterMirror::AdmitOptions admit;
    admit.queue_of = [this](const PodObject& p) { return queues_.leaf(p.queue); };
    admit.preempt = options_.preemption;
    admit.now_s = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    admit.preemptible = [this](const PodObject& p) {
      return p.scheduler_name == options_.scheduler_name && !p.deleting &&
             p.priority <= k8s::kSystemPriority;
    };
    admit.gang_min = [this](const std::string& gang) {
      const auto it = view_.groups.find(gang);
      return it == view_.groups.end() ? 0 : it->second.min_member;
    };
    const auto a = view_.mirror().admit(queues_.tree(), j.leaf, j.members, admit);
    const std::string& queue = queues_.tree().spec(j.leaf).name;
    if (!a.placement.placed) {
      const std::string why = a.placement.message.empty()
                                  ? fmt::format("{} ({})", a.why, sched::jobs::wait_key(a.waiting))
                                  : fmt::format("queue {}: {}", queue, a.why);
      const bool never = a.waiting == WaitReason::kInfeasible;
      return {never ? Severity::kError : Severity::kWarning,
              fmt::format("queue.{}", sched::jobs::wait_key(a.waiting)),
              fmt::format("{}: {}", j.name, why), ev, fix_for(a.waiting)};
    }
    std::vector<std::string> victims;
    for (const auto& v : a.victims) {
      for (const auto& p : view_.pods) {
        if (p.uid == v.uid) victims.push_back(p.key());
      }
    }
    for (const auto& m : j.members) view_.mirror().release(m.uid);
    for (const auto& v : a.victims) view_.mirror().restore(v.uid);
    if (!victims.empty()) {
      return {
          Severity::kWarning, "queue.preempts",
          fmt::format("{}: starts once {} pod(s) are preempted ({}; {})", j.name, victims.size(),
                      fmt::join(victims, ", "), sched::jobs::preempt_key(a.victims.front().reason)),
          ev,
          "gpuorch scheduler --queues evicts them itself; if they stay, check their "
          "PodDisruptionBudgets and termination (kubectl describe pod)"};
    }
    return {Severity::kWarning, "queue.fits",
            fmt::format("{}: fits now (on {})", j.name, fmt::join(a.placement.nodes, ", ")), ev,
            fmt::format("no scheduler has acted on it: check that a scheduler named '{}' runs "
                        "with --queues",
                        options_.scheduler_name)};
  }

  QueueOptions options_;
  ClusterView view_;
  k8s::ClusterQueues queues_;
};

}  // namespace

std::vector<Finding> explain_queues(const ClusterObjects& objects, const std::string& queue,
                                    const QueueOptions& options) {
  if (!objects.queues_served) {
    base::fail_input(
        "the cluster serves no Queue API (scheduling.run.ai/v2): install the Queue CRD of "
        "`gpuorch manifests`, or KAI-Scheduler's");
  }
  QueueExplainer ex(objects, options);
  return ex.explain(queue);
}

}  // namespace gpuorch::doctor

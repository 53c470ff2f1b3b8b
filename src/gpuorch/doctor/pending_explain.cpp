// The explanation is asked of a fresh ClusterMirror built from the cluster as it is now; each
// pod's trial placement is undone before the next, so every pod is explained against the same
// state, not against the pods explained before it.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "gpuorch/base/error.hpp"
#include "gpuorch/doctor/cluster_view.hpp"
#include "gpuorch/doctor/pending.hpp"
#include "gpuorch/k8s/mirror/gang_check.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"
#include "gpuorch/sched/filters/gpu_model.hpp"
#include "gpuorch/sched/framework/filter_registry.hpp"
#include "gpuorch/sched/node_constraints.hpp"

namespace gpuorch::doctor {
namespace {

using k8s::PodObject;

// Each filter says what a user can do about it (FilterPlugin::fix).
std::string fix_for(sched::FilterId r) {
  return r == sched::kFits ? "see the explanation" : std::string(sched::filter_plugin(r).fix);
}

// What another scheduler (kube-scheduler) wrote, to show beside the core's verdict.
// The API server's JSON, read by shape: a field of another type is absent, never an exception.
std::string own_condition(const nlohmann::json& pod) {
  const auto text = [](const nlohmann::json& o, const char* key) {
    const auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (!pod.is_object()) return "";
  const auto status = pod.find("status");
  if (status == pod.end() || !status->is_object()) return "";
  const auto conds = status->find("conditions");
  if (conds == status->end() || !conds->is_array()) return "";
  for (const auto& c : *conds) {
    if (c.is_object() && text(c, "type") == "PodScheduled" && text(c, "status") == "False") {
      return fmt::format("{}: {}", text(c, "reason"), text(c, "message"));
    }
  }
  return "";
}

class Explainer {
 public:
  Explainer(const ClusterObjects& o, const k8s::MirrorOptions& options) : view_(o, options) {}

  [[nodiscard]] const std::vector<PodObject>& pods() const { return view_.pods; }

  Finding explain(const PodObject& pod) {
    if (!pod.node_name.empty()) {
      return {Severity::kInfo, "pod.bound",
              fmt::format("{} is bound to {}", pod.key(), pod.node_name),
              fmt::format("phase {}", pod.phase), ""};
    }
    if (!view_.build_error.empty()) {
      return {Severity::kError, "pod.infeasible",
              fmt::format("{}: {}", pod.key(), view_.build_error), evidence(pod),
              "pass --policy efd-online, or the history the scheduler is given"};
    }
    Finding f =
        view_.node_count == 0
            ? Finding{Severity::kError, "pod.infeasible",
                      fmt::format("{}: the cluster has no node the scheduler can use", pod.key()),
                      evidence(pod), "register nodes (kubelet) or fix the ones left out"}
        : pod.gang.empty() ? explain_one(pod)
                           : explain_gang(pod);
    const std::string theirs = own_condition(*view_.raw.at(pod.uid));
    if (!theirs.empty()) f.evidence += fmt::format("; the pod's condition says {}", theirs);
    if (!view_.left_out.empty()) {
      f.evidence +=
          fmt::format("; {} node(s) left out: {}", view_.left_out.size(), view_.left_out.front());
    }
    return f;
  }

 private:
  std::string evidence(const PodObject& pod) const {
    // A pod's claims' GPUs count as its request (allocated, else asked).
    const workload::PodSpec spec = view_.dra().spec_with_claims(pod);
    return fmt::format("schedulerName {}, requests {} GPU{}{}, {} mCPU, {} MiB; {} nodes{}",
                       pod.scheduler_name, spec.gpu_count,
                       spec.gpu_share() ? fmt::format(" x {} milli", spec.gpu_milli) : "",
                       pod.claims.empty() ? "" : " through ResourceClaims", spec.cpu_milli,
                       spec.memory_mib, view_.node_count, dra_summary());
  }

  // The DRA GPUs and how many claims hold, when the cluster has any.
  std::string dra_summary() const {
    const auto& gpu_nodes = view_.dra().gpu_nodes();
    if (gpu_nodes.empty() || !view_.ready()) return "";
    // Whole GPUs and MIG instances apart: the core counts an instance as one more GPU of its
    // node, which is not what a person reading "GPUs" means.
    int total = 0;
    int used = 0;
    int instances = 0;
    int instances_used = 0;
    const auto& cluster = view_.mirror().cluster();
    for (cluster::NodeIndex n = 0; n < cluster.node_count(); ++n) {
      const std::string& name = cluster.spec(n).name;
      const k8s::DraNode* dra = view_.dra().inventory().node(name);
      if (!gpu_nodes.contains(name) || dra == nullptr) continue;
      const auto left = cluster.gpu_milli_left(n);
      for (std::size_t g = 0; g < left.size(); ++g) {
        const bool busy = left[g] < base::kMilliPerGpu;
        if (static_cast<int>(g) < dra->whole_gpus) {
          ++total;
          used += busy ? 1 : 0;
        } else {
          ++instances;
          instances_used += busy ? 1 : 0;
        }
      }
    }
    return fmt::format("; DRA GPUs on {} node(s): {} used, {} free{}", gpu_nodes.size(), used,
                       total - used,
                       instances == 0 ? std::string()
                                      : fmt::format(" (MIG instances: {} used, {} free)",
                                                    instances_used, instances - instances_used));
  }

  Finding explain_one(const PodObject& pod) {
    if (!pod.error.empty()) {
      return {Severity::kError, "pod.infeasible",
              fmt::format("{}: Infeasible: {}", pod.key(), pod.error), evidence(pod),
              "correct the pod's request"};
    }
    if (!pod.claims.empty()) return explain_claims(pod);
    const auto r = view_.mirror().schedule(pod);
    if (r.decision.outcome == sched::Outcome::kPlaced) {
      view_.mirror().release(pod.uid);
      return {
          Severity::kWarning, "pod.fits",
          fmt::format("{} fits now: the scheduler core would place it on {}", pod.key(), r.node),
          evidence(pod),
          fmt::format("no scheduler has acted on it: check that a scheduler named '{}' runs "
                      "(for gpuorch: `gpuorch scheduler`)",
                      pod.scheduler_name)};
    }
    sched::RequestResolver resolver(view_.mirror().cluster());
    const auto request = resolver.resolve(pod.spec);
    const bool infeasible = r.decision.outcome == sched::Outcome::kInfeasible;
    return {
        infeasible ? Severity::kError : Severity::kWarning,
        infeasible ? "pod.infeasible" : "pod.waiting",
        fmt::format("{}: {}", pod.key(),
                    k8s::unschedulable_message(r, request, view_.mirror().cluster().node_count())),
        evidence(pod),
        r.unknown_model.empty() ? fix_for(r.decision.main_reason())
                                : std::string(sched::filters::kGpuModel.fix)};
  }

  // A pod with ResourceClaims: the same plan, placement and words as gpuorch scheduler's
  // (k8s/mirror/dra_state.hpp).
  Finding explain_claims(const PodObject& pod) {
    using Outcome = k8s::DraState::Placement::Outcome;
    const auto p = view_.dra().place(pod, view_.mirror());
    if (p.placed()) {
      view_.mirror().release(pod.uid);
      return {Severity::kWarning, "pod.fits",
              fmt::format("{} fits now: the scheduler core would place it on {} with its "
                          "claims' devices",
                          pod.key(), p.result.node),
              evidence(pod),
              fmt::format("no scheduler has acted on it: check that a scheduler named '{}' runs "
                          "(for gpuorch: `gpuorch scheduler`; kube-scheduler allocates claims "
                          "itself)",
                          pod.scheduler_name)};
    }
    switch (p.outcome) {
      case Outcome::kWaiting:
        return {Severity::kWarning, "pod.waiting", fmt::format("{}: {}", pod.key(), p.message),
                evidence(pod), "create what it waits for"};
      case Outcome::kUnevaluated:
        return {Severity::kWarning, "pod.unevaluated", fmt::format("{}: {}", pod.key(), p.message),
                evidence(pod),
                "gpuorch does not evaluate this claim (docs/dra.md, \"Not yet\"); kube-scheduler's "
                "own DRA allocator may: see the pod's condition"};
      case Outcome::kInfeasible:
        return {Severity::kError, "pod.infeasible", fmt::format("{}: {}", pod.key(), p.message),
                evidence(pod), "correct the claim's requests or its DeviceClass"};
      default:
        return {Severity::kWarning, "pod.waiting", fmt::format("{}: {}", pod.key(), p.message),
                evidence(pod), "free GPUs that the claim's requests allow, or wait"};
    }
  }

  // The scheduler's gang path: the same checks (k8s::check_gang), then the placement tried.
  Finding explain_gang(const PodObject& pod) {
    const std::string& gang = pod.gang;
    std::vector<PodObject> pending;
    int bound = 0;
    for (const auto& p : view_.pods) {
      if (p.gang != gang) continue;
      if (!p.node_name.empty()) {
        ++bound;
      } else if (!p.deleting) {
        pending.push_back(p);
      }
    }
    std::sort(pending.begin(), pending.end(),
              [](const PodObject& a, const PodObject& b) { return a.key() < b.key(); });
    const std::string ev = evidence(pod);
    const auto group = view_.groups.find(gang);
    const int min = group == view_.groups.end() ? 1 : group->second.min_member;
    const k8s::GangCheck check = k8s::check_gang(
        gang, group == view_.groups.end() ? nullptr : &group->second, bound, pending);
    const std::string said = fmt::format("{}: {}", pod.key(), check.message);
    switch (check.hold) {
      case k8s::GangHold::kNone:
        break;
      case k8s::GangHold::kNoGroup:
        return {Severity::kWarning, "pod.gang-incomplete", said, ev,
                fmt::format("create the PodGroup {}", gang)};
      case k8s::GangHold::kMalformed:
        return {Severity::kError, "pod.infeasible", said, ev, "correct the PodGroup"};
      case k8s::GangHold::kMemberRefused:
        return {Severity::kError, "pod.infeasible", said, ev, "correct that member's request"};
      case k8s::GangHold::kIncomplete:
        return {Severity::kWarning, "pod.gang-incomplete", said, ev,
                fmt::format("create the {} missing member(s), or lower the PodGroup's minMember",
                            min - bound - static_cast<int>(pending.size()))};
    }
    const auto r = view_.mirror().schedule_gang(pending);
    if (r.placed) {
      for (const auto& p : pending) view_.mirror().release(p.uid);
      return {Severity::kWarning, "pod.fits",
              fmt::format("{}: gang {} fits now ({} members{})", pod.key(), gang, pending.size(),
                          r.domain.empty() ? "" : " under " + r.domain),
              ev,
              fmt::format("no scheduler has acted on it: check that a scheduler named '{}' runs",
                          pod.scheduler_name)};
    }
    const bool infeasible = r.message.find("Infeasible:") != std::string::npos;
    return {infeasible ? Severity::kError : Severity::kWarning,
            infeasible ? "pod.infeasible" : "pod.waiting",
            fmt::format("{}: gang {} ({} pending, minMember {}) cannot be placed whole, so none "
                        "of it is: member {}: {}",
                        pod.key(), gang, pending.size(), min, r.failed_pod, r.message),
            ev, "free room for every member at once, or make the gang smaller"};
  }

  ClusterView view_;
};

}  // namespace

std::vector<Finding> explain_pending(const ClusterObjects& objects, const std::string& pod,
                                     const k8s::MirrorOptions& options) {
  Explainer ex(objects, options);
  std::vector<Finding> out;
  if (!pod.empty()) {
    for (const auto& p : ex.pods()) {
      if (p.key() == pod) return {ex.explain(p)};
    }
    base::fail_input(fmt::format("pod {} not found (or it has finished)", pod));
  }
  for (const auto& p : ex.pods()) {
    if (p.node_name.empty()) out.push_back(ex.explain(p));
  }
  if (out.empty()) {
    out.push_back({Severity::kInfo, "pod.none-pending", "no pod is pending",
                   fmt::format("{} pods", ex.pods().size()), ""});
  }
  return out;
}

}  // namespace gpuorch::doctor

#pragma once
// gpuorch's Kueue AdmissionCheck (controllerName gpuorch.io/placeable, docs/kueue.md): Kueue
// reserves quota for a Workload by counting resources, not by placing them, so a job whose quota
// is free may still find no node set that holds it (GPUs fragmented across nodes, a gang that
// needs whole nodes) and then sits admitted and unplaced, holding quota others could use. This
// check answers, for every Workload whose quota Kueue reserved, with the scheduler core itself on
// the cluster as gpuorch scheduler sees it:
//   Ready     the pods fit now (every pod set at once, as a gang);
//   Pending   they do not fit yet, but pods that are terminating (Kueue's own preemptions) will
//             free room: asked again when they are gone;
//   Retry     they do not fit, but would on this cluster: Kueue releases the quota and requeues
//             the Workload after requeueAfterSeconds (growing with Kueue's retryCount);
//   Rejected  they would not fit even on the empty cluster (or cannot be read): Kueue deactivates
//             the Workload instead of holding quota for it forever.
// Pods that ask for GPUs through ResourceClaims (or templates) are placed on the DRA devices their
// claims may get, and devices allocated to claims by anyone count as used.
// Workloads marked Ready whose pods are not bound yet keep their room in every later answer, so
// two Workloads are never told Ready for the same GPUs.
#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpuorch/k8s/kueue/workload.hpp"
#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/k8s/mirror/dra_state.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"

namespace gpuorch::k8s::kueue {

struct PlaceableOptions {
  // Retry's requeueAfterSeconds: this, doubled per retry Kueue counted, at most 8 times it.
  std::chrono::seconds retry_after{15};
};

struct Verdict {
  std::string ns, name, uid;
  std::string check;      // the AdmissionCheck's name
  std::size_t index = 0;  // in status.admissionChecks
  std::string state;      // Ready | Pending | Retry | Rejected
  std::string message;
  int requeue_after_s = 0;  // Retry only
};

// The JSON patch (RFC 6902) that writes `v` into the Workload's status: a test that the entry at
// `index` is still this check (else the server refuses it and nothing is overwritten), then the
// state, message, time and, for Retry, requeueAfterSeconds.
nlohmann::json check_patch(const Verdict& v, const std::string& now_rfc3339);
// The status that marks an AdmissionCheck of ours Active (Kueue leaves a ClusterQueue whose
// checks are not Active inactive).
nlohmann::json active_status(const nlohmann::json& admission_check, const std::string& now_rfc3339);

class PlaceableChecks {
 public:
  explicit PlaceableChecks(PlaceableOptions options = {});

  // The informers' objects. Each returns whether it may change a verdict.
  bool admission_check(const nlohmann::json& obj, bool deleted);
  bool workload(const nlohmann::json& obj, bool deleted);
  bool flavor(const nlohmann::json& obj, bool deleted);
  // Every pod (the scheduler's informer): which Workload's pods exist and are bound, and what is
  // terminating.
  void pod(const nlohmann::json& obj, const PodObject& parsed, bool deleted);
  // DRA, where resource.k8s.io/v1 is served (docs/kueue.md, "Pods with ResourceClaims"): the
  // slices, classes and claims `dra` holds (a MirrorFeed's, whose mirror evaluate() is given)
  // decide what a pod's claims may get; a pod set's ResourceClaimTemplates (resource.k8s.io/v1)
  // stand for the claims its pods will have.
  void use_dra(DraState* dra) { dra_ = dra; }
  bool claim_template(const nlohmann::json& obj, bool deleted);

  // The AdmissionChecks of ours not yet marked Active (by this process).
  [[nodiscard]] std::vector<nlohmann::json> inactive_checks() const;
  void mark_active(const std::string& name) { active_.insert(name); }
  // Whether any Workload waits for our answer.
  [[nodiscard]] bool waiting() const;

  // The verdicts for every Workload whose check of ours is Pending with its quota reserved.
  // `now` is the cluster (what is bound and assumed), `empty` the same nodes with nothing on
  // them; both built. Placements made to answer are released before it returns.
  std::vector<Verdict> evaluate(ClusterMirror& now, ClusterMirror& empty);
  // A verdict the API server did not take: asked again on the next evaluate.
  void unwritten(const Verdict& v) { written_.erase(v.uid); }

 private:
  struct PodEntry {
    std::string owner;  // controller owner's uid, or the pod's own uid
    bool bound = false;
    bool terminating = false;
    PodObject parsed;
  };
  [[nodiscard]] bool ours(const std::string& check) const { return checks_.contains(check); }
  // Places `pods` where they would go now (all or none) and records their uids for release.
  bool place(ClusterMirror& mirror, std::vector<PodObject> pods, std::vector<std::string>& placed,
             std::string& why);
  // A Ready Workload's pods that are not bound yet: real pending pods, plus templates for those
  // its owner has not created yet.
  std::vector<PodObject> in_flight(const Workload& w) const;
  // The pods as the core is asked for them: one with claims (made, or to be made from its
  // templates) restricted to the GPUs they may get. Empty, with `outcome` and `why`, when a
  // claim cannot be planned (waits for a template, cannot be met, is outside what gpuorch
  // evaluates).
  using ClaimOutcome = DraState::Placement::Outcome;
  std::vector<PodObject> with_claims(std::vector<PodObject> pods, ClaimOutcome& outcome,
                                     std::string& why);

  PlaceableOptions options_;
  std::map<std::string, nlohmann::json> checks_;  // ours, by name
  std::set<std::string> active_;
  std::map<std::string, Flavor> flavors_;
  std::unordered_map<std::string, Workload> workloads_;  // by uid
  std::unordered_map<std::string, PodEntry> pods_;       // by pod uid
  // Controller owner uid -> its pods' uids, so a Workload's pods are found without a pass over
  // every pod of the cluster.
  std::unordered_map<std::string, std::set<std::string>> by_owner_;
  std::size_t terminating_ = 0;
  DraState* dra_ = nullptr;
  std::map<std::string, nlohmann::json> templates_;  // "namespace/name" -> spec.spec
  // Workload uid -> the state and message last written for it (not written again).
  std::unordered_map<std::string, std::string> written_;
};

}  // namespace gpuorch::k8s::kueue

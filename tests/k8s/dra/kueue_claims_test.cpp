// The Kueue check's verdicts on Workloads whose pods ask for GPUs through ResourceClaimTemplates
// (docs/kueue.md, "Pods with ResourceClaims"), on the DGX slice cut into two NVLink domains
// (GPUs 0-3, 4-6) without an API server: the pods are placed on the devices their templates'
// claims may get, devices allocated to claims by anyone (here kube-scheduler) count as used, and
// a template that does not exist is retried, never guessed.
#include <gtest/gtest.h>

#include <string>

#include "gpuorch/k8s/kueue/placeable.hpp"
#include "gpuorch/k8s/mirror/mirror_feed.hpp"
#include "k8s/dra/dra_objects.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s::kueue {
namespace {

using nlohmann::json;
using namespace dra_objects;

// A ResourceClaimTemplate of `count` GPUs of one NVLink domain.
json claim_template(const std::string& name, int count) {
  json spec = claim(name, count)["spec"];
  return {{"kind", "ResourceClaimTemplate"},
          {"metadata", {{"name", name}, {"namespace", "default"}}},
          {"spec", {{"spec", spec}}}};
}

// A Workload of `count` pods, each with a claim from template `tmpl`, quota reserved, our check
// Pending.
json workload(const std::string& name, int count, const std::string& tmpl) {
  const json pod_template = {
      {"spec",
       {{"resourceClaims", json::array({{{"name", "gpus"}, {"resourceClaimTemplateName", tmpl}}})},
        {"containers", json::array({{{"name", "c"},
                                     {"resources",
                                      {{"requests", {{"cpu", "1"}}},
                                       {"claims", json::array({{{"name", "gpus"}}})}}}}})}}}};
  return {{"metadata",
           {{"name", name},
            {"namespace", "default"},
            {"uid", "wl-" + name},
            {"resourceVersion", "1"},
            {"creationTimestamp", "2026-12-04T10:00:00Z"},
            {"ownerReferences", json::array({{{"kind", "JobSet"}, {"uid", "owner-" + name}}})}}},
          {"spec",
           {{"podSets",
             json::array({{{"name", "workers"}, {"count", count}, {"template", pod_template}}})}}},
          {"status",
           {{"conditions", json::array({{{"type", "QuotaReserved"}, {"status", "True"}}})},
            {"admission", {{"clusterQueue", "cq"}, {"podSetAssignments", json::array()}}},
            {"admissionChecks",
             json::array({{{"name", "placeable"}, {"state", "Pending"}, {"message", ""}}})}}}};
}

struct DraFixture {
  MirrorFeed feed{MirrorOptions{"best-fit", 42, {}, {}}, {}};
  ClusterMirror empty{MirrorOptions{"best-fit", 42, {}, {}}};
  PlaceableChecks checks;
  DraFixture() {
    feed.node(dra_node(), false);
    feed.slice(slice(), false);
    feed.device_class(gpu_class(), false);
    EXPECT_EQ(feed.ensure_built(), "");
    std::map<std::string, cluster::NodeSpec> nodes = feed.nodes();
    for (auto& [name, spec] : nodes) (void)feed.dra().inventory().apply(spec);
    empty.set_nodes(nodes);
    empty.ensure_built({test::pod("h", 1000, 1, 1000)});
    checks.use_dra(&feed.dra());
    checks.admission_check({{"metadata", {{"name", "placeable"}, {"generation", 1}}},
                            {"spec", {{"controllerName", "gpuorch.io/placeable"}}}},
                           false);
    checks.claim_template(claim_template("pair", 2), false);
  }
  // The verdict on one Workload just added.
  Verdict verdict(const json& w) {
    checks.workload(w, false);
    const auto v = checks.evaluate(feed.mirror(), empty);
    EXPECT_EQ(v.size(), 1U);
    checks.workload(w, true);
    return v.empty() ? Verdict{} : v.front();
  }
};

TEST(KueueDraClaims, PodsWithClaimTemplatesArePlacedOnTheDevicesTheirClaimsMayGet) {
  DraFixture f;
  // Two pairs of one domain each: the 4-GPU and the 3-GPU domains hold them.
  Verdict v = f.verdict(workload("two", 2, "pair"));
  EXPECT_EQ(v.state, "Ready") << v.message;
  EXPECT_EQ(v.message, "placeable now: 2 pods on dgx x2") << v.message;
  // Four pairs: 2 + 1 per domain at most, even empty.
  v = f.verdict(workload("four", 4, "pair"));
  EXPECT_EQ(v.state, "Rejected") << v.message;
  EXPECT_NE(v.message.find("does not fit even on the empty cluster"), std::string::npos)
      << v.message;
  // A template nobody made: retried.
  v = f.verdict(workload("missing", 1, "nope"));
  EXPECT_EQ(v.state, "Retry") << v.message;
  EXPECT_NE(v.message.find("ResourceClaimTemplate default/nope"), std::string::npos) << v.message;
  // What the what-if placed is gone again: every GPU free.
  EXPECT_EQ(f.feed.mirror().cluster().fully_free_gpus(0), f.feed.mirror().cluster().gpu_total());
}

TEST(KueueDraClaims, DevicesAllocatedByKubeSchedulerCountAsUsed) {
  DraFixture f;
  // kube-scheduler gave a claim the whole 4-GPU domain: one pair fits now (in the 3-GPU one), two
  // only once that claim goes.
  const int free = f.feed.mirror().cluster().fully_free_gpus(0);
  f.feed.claim(allocated(claim("quad", 4), {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, "other"), false);
  EXPECT_EQ(f.feed.mirror().cluster().fully_free_gpus(0), free - 4);
  Verdict v = f.verdict(workload("one", 1, "pair"));
  EXPECT_EQ(v.state, "Ready") << v.message;
  v = f.verdict(workload("two", 2, "pair"));
  EXPECT_EQ(v.state, "Retry") << v.message;
  EXPECT_NE(v.message.find("not placeable now"), std::string::npos) << v.message;
  f.feed.claim(allocated(claim("quad", 4), {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}, "other"), true);
  v = f.verdict(workload("two-again", 2, "pair"));
  EXPECT_EQ(v.state, "Ready") << v.message;
}

}  // namespace
}  // namespace gpuorch::k8s::kueue

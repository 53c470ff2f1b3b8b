// `gpuorch manifests` against a real kube-apiserver (support/control_plane.hpp): every object the
// command writes, read back from its YAML files as `kubectl apply -f DIR` would, is accepted by
// the API server (server-side dry run, strict field validation, so a misspelt or misplaced field
// fails); the PodGroup CRD is created for real and serves PodGroups with its schema and status
// subresource; and the scheduler's RBAC, created for real, allows what the scheduler calls and
// nothing else, as the API server's own SubjectAccessReview answers.
//
// Two TEST()s only: each ctest test is its own process and starts its own control plane.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/io/queue_yaml.hpp"
#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"
#include "k8s/apply_support.hpp"
#include "support/control_plane.hpp"
#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;
using test::ControlPlane;
using test_apply::create_or_replace;
using test_apply::Resource;
using test_apply::resource_of;

constexpr const char* kCrd = "podgroups.scheduling.x-k8s.io";
constexpr const char* kCrds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/";
constexpr const char* kCrdPath =
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.x-k8s.io";

// YAML as the API server's YAML decoder reads it: quoted scalars are strings, plain ones may be
// booleans, null or integers (all that gpuorch's objects hold).
json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json j = json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      json j = json::array();
      for (const auto& v : n) j.push_back(yaml_to_json(v));
      return j;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() != "?") return s;  // quoted or a block literal
      if (s == "true") return true;
      if (s == "false") return false;
      if (s == "null" || s == "~") return nullptr;
      const bool integer =
          !s.empty() && s.find_first_not_of("0123456789", s[0] == '-' ? 1 : 0) == std::string::npos;
      if (integer && s != "-") return std::stoll(s);
      return s;
    }
    default:
      return nullptr;
  }
}

struct Written {
  std::string file;
  json object;
};

// `gpuorch manifests ARGS -o DIR`, then every file in DIR in name order (kubectl's order).
std::vector<Written> write_and_read(const std::vector<std::string>& args, const test::TempDir& dir,
                                    const std::string& sub) {
  std::vector<std::string> cli = {"manifests", "-o", dir.file(sub)};
  cli.insert(cli.end(), args.begin(), args.end());
  const auto r = test::run_cli(cli, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.file(sub))) {
    files.push_back(e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  std::vector<Written> out;
  for (const auto& f : files) {
    const YAML::Node node = YAML::LoadFile(dir.file(sub + "/" + f));
    out.push_back({f, yaml_to_json(node)});
  }
  return out;
}

long status_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const ApiError& e) {
    return e.status();
  }
  return 0;
}

bool eventually(const std::function<bool()>& ok, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return ok();
}

bool crd_established(ApiClient& api, const std::string& name) {
  const json crd = api.get(kCrds + name);
  for (const auto& c : crd.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == "Established" && c.value("status", "") == "True") return true;
  }
  return false;
}

TEST(ManifestsApply, EveryObjectAcceptedAndPodGroupsServed) {
  auto& plane = ControlPlane::shared();
  ApiClient api(load_kubeconfig(plane.kubeconfig()));
  test::TempDir dir;
  // The option sets that change which objects are written, each into its own namespace.
  const std::vector<std::vector<std::string>> option_sets = {
      {"--namespace", "gpuorch-apply-a"},
      {"--namespace", "gpuorch-apply-b", "--vendor", "both", "--sharing", "time-slicing",
       "--replicas", "8", "--image", "registry.example/gpuorch:1.2"},
      {"--namespace", "gpuorch-apply-c", "--vendor", "nvidia", "--sharing", "mps"},
  };
  std::map<std::string, int> kinds;
  for (std::size_t set = 0; set < option_sets.size(); ++set) {
    const std::string ns = option_sets[set][1];
    const auto written = write_and_read(option_sets[set], dir, "set" + std::to_string(set));
    ASSERT_FALSE(written.empty());
    // Exactly what the library makes: the YAML files lose and change nothing.
    ManifestOptions o;
    o.ns = ns;
    if (set == 1) {
      o.vendor = "both";
      o.sharing = SharingKind::kTimeSlicing;
      o.replicas = 8;
      o.image = "registry.example/gpuorch:1.2";
    } else if (set == 2) {
      o.sharing = SharingKind::kMps;
    }
    std::map<std::string, json> made;
    for (const auto& m : make_manifests(o)) made[m.file] = json::parse(m.object.dump());
    ASSERT_EQ(written.size(), made.size());
    for (const auto& w : written) {
      ASSERT_EQ(made.count(w.file), 1u) << w.file;
      EXPECT_EQ(w.object, made[w.file]) << w.file;
    }
    for (const auto& w : written) {
      SCOPED_TRACE(ns + "/" + w.file);
      const std::string kind = w.object["kind"];
      ++kinds[kind];
      Resource r;
      ASSERT_NO_THROW(r = resource_of(api, w.object));
      // kubectl would put a namespaced object without metadata.namespace into "default".
      EXPECT_EQ(r.namespaced, w.object["metadata"].contains("namespace"));
      if (r.namespaced) {
        EXPECT_EQ(w.object["metadata"]["namespace"], ns);
      }
      try {
        if (kind == "Namespace" || kind == "CustomResourceDefinition") {
          // For real: the namespaced objects need their namespace, PodGroups their kind.
          const json got = create_or_replace(api, r, w.object);
          EXPECT_EQ(got["metadata"]["name"], w.object["metadata"]["name"]);
          if (kind == "CustomResourceDefinition") {
            const std::string name = w.object["metadata"]["name"];
            EXPECT_TRUE(
                eventually([&] { return crd_established(api, name); }, std::chrono::seconds(20)))
                << api.get(kCrds + name)["status"].dump();
          }
          continue;
        }
        const std::string path =
            r.collection + "/" + w.object["metadata"]["name"].get<std::string>();
        json got;
        try {
          got = api.create(r.collection + "?fieldValidation=Strict", w.object, true);
          // A dry run stores nothing.
          EXPECT_EQ(status_of([&] { api.get(path); }), 404);
        } catch (const ApiError& e) {
          // A cluster-wide object another test created for real: the same check as an update.
          if (e.status() != 409 || r.namespaced) throw;
          json next = w.object;
          next["metadata"]["resourceVersion"] = api.get(path)["metadata"]["resourceVersion"];
          got = api.replace(path + "?dryRun=All&fieldValidation=Strict", next);
        }
        EXPECT_EQ(got["kind"], kind);
        EXPECT_EQ(got["metadata"]["name"], w.object["metadata"]["name"]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "the API server refused it: " << e.what();
      }
    }
  }
  // Every kind gpuorch writes went through at least once.
  for (const char* k : {"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole",
                        "ClusterRoleBinding", "Role", "RoleBinding", "DaemonSet", "ConfigMap",
                        "Service", "Deployment"}) {
    EXPECT_GT(kinds[k], 0) << k;
  }

  // The CRD's schema as the server keeps it: structural (no NonStructuralSchema condition).
  const json crd = api.get(kCrdPath);
  for (const auto& c : crd["status"].value("conditions", json::array())) {
    EXPECT_NE(c.value("type", ""), "NonStructuralSchema") << c.dump();
  }
  EXPECT_EQ(crd["status"]["acceptedNames"]["kind"], "PodGroup");

  // A PodGroup through the CRD, for real, and read back.
  const std::string groups =
      "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/gpuorch-apply-a/podgroups";
  const json group = json::parse(R"({
    "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
    "metadata": {"name": "train-8"},
    "spec": {"minMember": 8, "scheduleTimeoutSeconds": 120,
             "minResources": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": 8}},
    "status": {"phase": "Running", "running": 99}
  })");
  // Left by an earlier run in this process (--gtest_repeat): gone first. CRs have no finalizer
  // here, so the delete is immediate.
  status_of([&] { api.remove(groups + "/train-8"); });
  json created;
  // The new kind's handler may answer 404 for a moment after Established.
  ASSERT_TRUE(eventually(
      [&] {
        try {
          created = api.create(groups + "?fieldValidation=Strict", group);
          return true;
        } catch (const ApiError& e) {
          if (e.status() != 404) throw;
          return false;
        }
      },
      std::chrono::seconds(20)));
  const json read = api.get(groups + "/train-8");
  EXPECT_EQ(read["kind"], "PodGroup");
  EXPECT_EQ(read["spec"]["minMember"], 8);
  EXPECT_EQ(read["spec"]["scheduleTimeoutSeconds"], 120);
  EXPECT_EQ(read["spec"]["minResources"]["memory"], "256Gi");
  EXPECT_EQ(read["spec"]["minResources"]["nvidia.com/gpu"], 8);
  // Status is a subresource: what a create carries is dropped...
  EXPECT_FALSE(read.contains("status") && read["status"].contains("running")) << read.dump();
  // ...and written through /status, with every scheduler-plugins field and conditions.
  const json status = json::parse(R"({"status": {
    "phase": "Scheduling", "occupiedBy": "0f6c5d1e-4a7b-4c11-9a52-2d3f9b1e7c10",
    "scheduled": 3, "running": 1, "succeeded": 0, "failed": 0,
    "scheduleStartTime": "2025-01-02T03:04:05Z",
    "conditions": [{"type": "Scheduled", "status": "False", "reason": "Waiting",
                    "message": "3/8 members bound", "lastTransitionTime": "2025-01-02T03:04:05Z"}]
  }})");
  ASSERT_NO_THROW(api.patch(groups + "/train-8/status", status));
  const json after = api.get(groups + "/train-8");
  EXPECT_EQ(after["status"], status["status"]) << after["status"].dump(2);
  // The schema is enforced: a phase outside the list, a count that is not a number, a negative
  // minMember, an unknown field.
  EXPECT_EQ(status_of([&] {
              api.patch(groups + "/train-8/status", {{"status", {{"phase", "Sleeping"}}}});
            }),
            422);
  json bad = group;
  bad["metadata"]["name"] = "bad";
  bad["spec"]["minMember"] = "eight";
  EXPECT_EQ(status_of([&] { api.create(groups, bad, true); }), 422);
  bad["spec"]["minMember"] = -1;
  EXPECT_EQ(status_of([&] { api.create(groups, bad, true); }), 422);
  bad["spec"]["minMember"] = 2;
  bad["spec"]["minResources"] = {{"cpu", "lots"}};
  EXPECT_EQ(status_of([&] { api.create(groups, bad, true); }), 422);
  bad["spec"]["minResources"] = {{"cpu", "2"}};
  bad["spec"]["minMembers"] = 2;
  const long unknown =
      status_of([&] { api.create(groups + "?fieldValidation=Strict", bad, true); });
  EXPECT_TRUE(unknown == 400 || unknown == 422) << unknown;
  EXPECT_EQ(api.get(groups)["items"].size(), 1u);

  // Queues: the files `gpuorch sim timeline --queues` reads (KAI's Queue) apply to the cluster as
  // they are, strictly validated, and read back from the API server they are the same queues to
  // the same reader.
  const std::string queues = "/apis/scheduling.run.ai/v2/queues";
  // model_queues.yaml has gpuorch's quotas per GPU model: the CRD declares them, so a strict
  // create takes them and the structural schema does not prune them.
  for (const char* fixture : {"/timeline/elastic_queues.yaml", "/timeline/tenant_queues.yaml",
                              "/timeline/model_queues.yaml"}) {
    SCOPED_TRACE(fixture);
    const std::string path = std::string(test::fixtures_dir()) + fixture;
    const auto want = io::load_queues(path);
    std::string back;  // the objects as the API server returns them, one YAML document each
    for (const YAML::Node& doc : YAML::LoadAllFromFile(path)) {
      const json q = yaml_to_json(doc);
      const std::string name = q["metadata"]["name"];
      status_of([&] { api.remove(queues + "/" + name); });
      ASSERT_TRUE(eventually(
          [&] {
            try {
              api.create(queues + "?fieldValidation=Strict", q);
              return true;
            } catch (const ApiError& e) {
              // The new kind's handler may answer 404 for a moment; the delete just above may
              // still be under way (409).
              if (e.status() != 404 && e.status() != 409) throw;
              return false;
            }
          },
          std::chrono::seconds(20)));
      back += api.get(queues + "/" + name).dump() + "\n---\n";
    }
    const auto got = io::parse_queues(back, "read back");
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].name, want[i].name);
      EXPECT_EQ(got[i].parent, want[i].parent);
      EXPECT_EQ(got[i].priority, want[i].priority);
      for (const auto& [g, w] : {std::pair{got[i].gpu, want[i].gpu},
                                 {got[i].cpu, want[i].cpu},
                                 {got[i].memory, want[i].memory}}) {
        EXPECT_EQ(g.quota, w.quota) << got[i].name;
        EXPECT_EQ(g.limit, w.limit) << got[i].name;
        EXPECT_EQ(g.over_quota_weight, w.over_quota_weight) << got[i].name;
      }
      ASSERT_EQ(got[i].gpu_models.size(), want[i].gpu_models.size()) << got[i].name;
      for (std::size_t m = 0; m < got[i].gpu_models.size(); ++m) {
        EXPECT_EQ(got[i].gpu_models[m].model, want[i].gpu_models[m].model) << got[i].name;
        EXPECT_EQ(got[i].gpu_models[m].gpu.quota, want[i].gpu_models[m].gpu.quota);
        EXPECT_EQ(got[i].gpu_models[m].gpu.limit, want[i].gpu_models[m].gpu.limit);
      }
    }
  }
  // The schema: a quota that is not a number, a negative weight.
  json bad_queue = json::parse(R"({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
    "metadata": {"name": "bad"}, "spec": {"resources": {"gpu": {"quota": "four"}}}})");
  EXPECT_EQ(status_of([&] { api.create(queues, bad_queue, true); }), 422);
  bad_queue["spec"]["resources"]["gpu"] = {{"quota", 4}, {"overQuotaWeight", -1}};
  EXPECT_EQ(status_of([&] { api.create(queues, bad_queue, true); }), 422);
}

// Asks the API server whether the scheduler's service account may do something.
bool may(ApiClient& api, const std::string& sa_ns, const json& attributes) {
  json review;
  review["apiVersion"] = "authorization.k8s.io/v1";
  review["kind"] = "SubjectAccessReview";
  review["spec"]["user"] = "system:serviceaccount:" + sa_ns + ":gpuorch-scheduler";
  review["spec"]["groups"] = json::array(
      {"system:serviceaccounts", "system:serviceaccounts:" + sa_ns, "system:authenticated"});
  review["spec"]["resourceAttributes"] = attributes;
  const json answer = api.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review);
  return answer["status"].value("allowed", false);
}

json attrs(const std::string& verb, const std::string& group, const std::string& resource,
           const std::string& subresource = "", const std::string& ns = "default") {
  json a = {{"verb", verb}, {"group", group}, {"resource", resource}};
  if (!subresource.empty()) a["subresource"] = subresource;
  if (!ns.empty()) a["namespace"] = ns;
  return a;
}

TEST(ManifestsApply, SchedulerRbacAsTheApiServerDecides) {
  auto& plane = ControlPlane::shared();
  ApiClient api(load_kubeconfig(plane.kubeconfig()));
  const std::string ns = "gpuorch-rbac";
  ManifestOptions o;
  o.ns = ns;
  for (const auto& m : make_manifests(o)) {
    const std::string kind = m.object["kind"];
    const std::string name = m.object["metadata"]["name"];
    const bool wanted = kind == "Namespace" ||
                        (name.rfind("gpuorch-scheduler", 0) == 0 &&
                         (kind == "ServiceAccount" || kind.find("Role") != std::string::npos));
    if (!wanted) continue;
    SCOPED_TRACE(m.file);
    const json obj = json::parse(m.object.dump());
    ASSERT_NO_THROW(create_or_replace(api, resource_of(api, obj), obj));
  }
  // RBAC reads roles from its informers: wait until the binding is seen.
  ASSERT_TRUE(eventually([&] { return may(api, ns, attrs("create", "", "pods", "binding")); },
                         std::chrono::seconds(20)));

  struct Case {
    json attributes;
    bool allowed;
  };
  const std::vector<Case> cases = {
      // What the scheduler calls, in any namespace (pods of every namespace).
      {attrs("create", "", "pods", "binding"), true},
      {attrs("create", "", "pods", "binding", "team-a"), true},
      {attrs("list", "", "nodes", "", ""), true},
      {attrs("watch", "", "nodes", "", ""), true},
      {attrs("get", "", "nodes", "", ""), true},
      {attrs("list", "", "pods", "", ""), true},
      {attrs("watch", "", "pods", "", ""), true},
      {attrs("patch", "", "pods", "", "team-a"), false},  // GPUs travel in the Binding
      {attrs("patch", "", "pods", "status", "team-a"), true},
      {attrs("update", "", "pods", "status", "team-a"), true},
      {attrs("create", "", "events", "", "team-a"), true},
      {attrs("patch", "", "events", "", "team-a"), true},
      {attrs("create", "events.k8s.io", "events", "", "team-a"), true},
      {attrs("watch", "scheduling.x-k8s.io", "podgroups", "", ""), true},
      {attrs("update", "scheduling.x-k8s.io", "podgroups", "status", "team-a"), true},
      // --queues: the Queue informer and status, and preemption through the Eviction API.
      {attrs("watch", "scheduling.run.ai", "queues", "", ""), true},
      {attrs("patch", "scheduling.run.ai", "queues", "status", ""), true},
      {attrs("create", "", "pods", "eviction", "team-a"), true},
      {attrs("get", "coordination.k8s.io", "leases", "", ns), true},
      {attrs("create", "coordination.k8s.io", "leases", "", ns), true},
      {attrs("update", "coordination.k8s.io", "leases", "", ns), true},
      // And nothing else.
      {attrs("delete", "", "pods"), false},
      {attrs("deletecollection", "", "pods"), false},
      {attrs("create", "", "pods"), false},
      {attrs("update", "", "pods"), false},
      {attrs("create", "scheduling.run.ai", "queues", "", ""), false},
      {attrs("delete", "scheduling.run.ai", "queues", "", ""), false},
      {attrs("get", "", "secrets"), false},
      {attrs("list", "", "secrets", "", ""), false},
      {attrs("get", "", "secrets", "", ns), false},
      {attrs("get", "", "configmaps"), false},
      {attrs("patch", "", "nodes", "", ""), false},
      {attrs("update", "", "nodes", "status", ""), false},
      {attrs("delete", "", "nodes", "", ""), false},
      {attrs("delete", "", "events", "", "team-a"), false},
      {attrs("create", "scheduling.x-k8s.io", "podgroups", "", "team-a"), false},
      {attrs("delete", "scheduling.x-k8s.io", "podgroups", "", "team-a"), false},
      // The Lease only in its own namespace, and never deleted.
      {attrs("update", "coordination.k8s.io", "leases", "", "kube-system"), false},
      {attrs("create", "coordination.k8s.io", "leases", "", "default"), false},
      {attrs("delete", "coordination.k8s.io", "leases", "", ns), false},
      {attrs("list", "coordination.k8s.io", "leases", "", ns), false},
      {attrs("create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""), false},
      {attrs("escalate", "rbac.authorization.k8s.io", "clusterroles", "", ""), false},
      {attrs("impersonate", "", "serviceaccounts"), false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(may(api, ns, c.attributes), c.allowed) << c.attributes.dump();
  }
  // Another account in the same namespace gets none of it.
  json review;
  review["apiVersion"] = "authorization.k8s.io/v1";
  review["kind"] = "SubjectAccessReview";
  review["spec"]["user"] = "system:serviceaccount:" + ns + ":gpuorch-exporter";
  review["spec"]["groups"] = json::array({"system:serviceaccounts", "system:authenticated"});
  review["spec"]["resourceAttributes"] = attrs("create", "", "pods", "binding");
  EXPECT_FALSE(
      api.create("/apis/authorization.k8s.io/v1/subjectaccessreviews", review)["status"].value(
          "allowed", false));
  // The cluster-wide objects go again, so other tests of this process find the cluster as it was.
  for (const char* path :
       {"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/gpuorch-scheduler-gpuorch-rbac",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/gpuorch-scheduler-gpuorch-rbac"}) {
    EXPECT_NO_THROW(api.remove(path)) << path;
  }
}

}  // namespace
}  // namespace gpuorch::k8s

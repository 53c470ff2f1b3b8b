// Issue 32 item 8: `gpuorch scheduler`, `gpuorch extender` and `gpuorch doctor` keep one cluster
// mirror's bookkeeping (k8s/mirror/mirror_feed.hpp). The same informer events given to the
// scheduler and the extender (and their end state, listed, to doctor) must leave the same node
// set, the same nodes left out, the same live pods and the same pods counted on their nodes;
// this fails as soon as one of them keeps nodes or pods its own way again.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "gpuorch/doctor/cluster_view.hpp"
#include "gpuorch/k8s/extender/extender_service.hpp"
#include "gpuorch/k8s/scheduler/scheduler_service.hpp"
#include "k8s/fake_api_server.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

json node(const std::string& name, int gpus, const std::string& heartbeat = "t0") {
  const json res = {{"cpu", "64"},
                    {"memory", "256Gi"},
                    {"pods", "110"},
                    {"nvidia.com/gpu", std::to_string(gpus)}};
  return {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", name}, {"uid", "uid-" + name}, {"labels", {{"nvidia.com/gpu.product", "A100"}}}}},
      {"status",
       {{"capacity", res},
        {"allocatable", res},
        // What a kubelet's status report changes: nothing the core reads.
        {"conditions", json::array({{{"type", "Ready"}, {"lastHeartbeatTime", heartbeat}}})}}}};
}

json pod(const std::string& name, int gpus, const std::string& node_name,
         const std::string& phase = "Running") {
  const json res = {{"cpu", "1"}, {"memory", "1Gi"}, {"nvidia.com/gpu", std::to_string(gpus)}};
  json spec = {
      {"schedulerName", "gpuorch"},
      {"containers",
       json::array({{{"name", "c"}, {"resources", {{"requests", res}, {"limits", res}}}}})}};
  if (!node_name.empty()) spec["nodeName"] = node_name;
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name}}},
          {"spec", spec},
          {"status", {{"phase", node_name.empty() ? "Pending" : phase}}}};
}

struct Event {
  bool is_node;
  json object;
  bool deleted = false;
};

// Nodes added, updated (a heartbeat only; a GPU count that changes), refused (no allocatable)
// and deleted; pods pending, bound, bound again (an update), finished and deleted.
std::vector<Event> events() {
  json bad = node("gpu-bad", 4);
  bad["status"].erase("allocatable");
  return {
      {true, node("gpu-a", 8)},
      {true, node("gpu-b", 4)},
      {true, node("gpu-c", 4)},
      {true, bad},
      {false, pod("p-pending", 1, "")},
      {false, pod("p-a", 2, "gpu-a")},
      {false, pod("p-a", 2, "gpu-a")},  // an update of a bound pod: counted once
      {false, pod("p-b", 1, "gpu-b")},
      {false, pod("p-done", 4, "gpu-a")},
      {true, node("gpu-a", 8, "t1")},  // a heartbeat
      {false, pod("p-done", 4, "gpu-a", "Succeeded")},
      {false, pod("p-gone", 1, "gpu-c")},
      {false, pod("p-gone", 1, "gpu-c"), true},
      {true, node("gpu-c", 4), true},
      {true, node("gpu-b", 6)},  // a change the core sees
      {false, pod("p-late", 1, "gpu-b")},
  };
}

MirrorOptions mirror_options() {
  MirrorOptions o;
  o.policy = "best-fit";
  return o;
}

std::set<std::string> counted(const ClusterMirror& m, const std::vector<std::string>& uids) {
  std::set<std::string> out;
  for (const auto& uid : uids) {
    if (m.accounted(uid)) out.insert(uid);
  }
  return out;
}

std::map<std::string, int> node_gpus(const MirrorFeed& feed) {
  std::map<std::string, int> out;
  for (const auto& [name, spec] : feed.nodes()) out[name] = spec.gpu_count;
  return out;
}

std::vector<std::string> history_names(const MirrorFeed& feed) {
  std::vector<std::string> out;
  for (const auto& p : feed.history()) out.push_back(p.name);
  return out;
}

TEST(MirrorFeedAgreement, SchedulerExtenderAndDoctorKeepTheSameNodesAndPods) {
  test::FakeApiServer fake;
  ApiClient api(fake.config());
  SchedulerServiceOptions so;
  so.mirror = mirror_options();
  SchedulerService scheduler(api, so);
  ExtenderOptions eo;
  eo.mirror = mirror_options();
  ExtenderService extender(api, eo);

  std::map<std::string, json> nodes, pods;  // the end state, as doctor would list it
  for (const Event& e : events()) {
    const std::string name = e.object["metadata"]["name"];
    if (e.is_node) {
      scheduler.handle_node(e.object, e.deleted);
      extender.on_node(e.object, e.deleted);
      e.deleted ? (void)nodes.erase(name) : (void)(nodes[name] = e.object);
    } else {
      scheduler.handle_pod(e.object, e.deleted);
      extender.on_pod(e.object, e.deleted);
      e.deleted ? (void)pods.erase(name) : (void)(pods[name] = e.object);
    }
  }
  doctor::ClusterObjects listed;
  for (const auto& [name, n] : nodes) listed.nodes.push_back(n);
  for (const auto& [name, p] : pods) listed.pods.push_back(p);
  doctor::ClusterView view(listed, mirror_options());

  const MirrorFeed& s = scheduler.feed();
  const MirrorFeed& x = extender.feed();
  const std::map<std::string, int> want_nodes = {{"gpu-a", 8}, {"gpu-b", 6}};
  EXPECT_EQ(node_gpus(s), want_nodes);
  EXPECT_EQ(node_gpus(x), want_nodes);
  EXPECT_EQ(view.node_count, want_nodes.size());

  ASSERT_EQ(s.left_out().size(), 1u);
  EXPECT_EQ(x.left_out(), s.left_out());
  EXPECT_EQ(view.left_out, std::vector<std::string>{s.left_out().at("gpu-bad")});

  // Live: pending, p-a, p-b, p-late (p-done finished, p-gone deleted).
  EXPECT_EQ(s.live_pods(), 4u);
  EXPECT_EQ(x.live_pods(), s.live_pods());
  EXPECT_EQ(view.pods.size(), s.live_pods());
  EXPECT_EQ(history_names(x), history_names(s));

  const std::vector<std::string> uids = {"uid-p-pending", "uid-p-a",    "uid-p-b",
                                         "uid-p-done",    "uid-p-gone", "uid-p-late"};
  const std::set<std::string> want_counted = {"uid-p-a", "uid-p-b", "uid-p-late"};
  EXPECT_EQ(counted(s.mirror(), uids), want_counted);
  EXPECT_EQ(counted(x.mirror(), uids), want_counted);
  ASSERT_TRUE(view.ready()) << view.build_error;
  EXPECT_EQ(counted(view.mirror(), uids), want_counted);
  // Counted once: gpu-a holds p-a's 2 GPUs, gpu-b p-b's and p-late's 1 each.
  const cluster::Cluster& c = view.mirror().cluster();
  std::map<std::string, int> free;
  for (cluster::NodeIndex n = 0; n < c.node_count(); ++n) {
    free[c.spec(n).name] = c.fully_free_gpus(n);
  }
  EXPECT_EQ(free, (std::map<std::string, int>{{"gpu-a", 6}, {"gpu-b", 4}}));
}

}  // namespace
}  // namespace gpuorch::k8s

// The node labeller against the real API server (docs/labeller.md): the labels of a recorded
// H200 host with time-slicing replicas 4 appear on the Node next to a label someone else wrote;
// switching sharing off in the config file is on the Node well within one refresh interval (the
// file is watched), with -SHARED and replicas 4 gone; `gpuorch node-labeller --once` does the same
// from the command line. A MIG reconfiguration (the host changes) with the mixed strategy brings
// the MIG labels, and the strategy back to none removes them.
#include "gpuorch/k8s/labeller/node_labeller.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "k8s/k8s_support.hpp"
#include "support/control_plane.hpp"
#include "support/kube_objects.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

const std::string kNode = "gpu-node-1";
const std::string kPath = "/api/v1/nodes/" + kNode;

const char* kTimeSlicing4 =
    "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n";

// As a ConfigMap update does it: the new content appears under the same name in one rename.
void replace_file(const std::string& path, const std::string& text) {
  test::write_text(path + ".new", text);
  std::filesystem::rename(path + ".new", path);
}

std::string label(const json& node, const std::string& key) {
  return node["metadata"].value("labels", json::object()).value(key, "<absent>");
}

TEST(NodeLabeller, LabelsFollowTheConfigOnTheRealApiServer) {
  auto& plane = test::ControlPlane::shared();
  ApiClient api(load_cluster_config(plane.kubeconfig()));
  test::clear_cluster(api);
  api.create("/api/v1/nodes", {{"apiVersion", "v1"},
                               {"kind", "Node"},
                               {"metadata", {{"name", kNode}, {"labels", {{"team", "a"}}}}}});
  test::TempDir dir;
  const std::string config = dir.file("config.yaml");
  test::write_text(config, kTimeSlicing4);

  LabellerOptions o;
  o.node_name = kNode;
  o.config_file = config;
  // The hardware: read on every refresh, swapped below as a MIG reconfiguration would.
  std::mutex host_mutex;
  std::string host_name = "h200-vm";
  o.host = [&] {
    const std::lock_guard<std::mutex> lock(host_mutex);
    return test::fixture_host(host_name);
  };
  o.interval = 60s;  // far longer than the test: only the file watch can explain a change
  o.config_poll = 100ms;
  NodeLabeller labeller(&api, o);
  std::atomic<bool> stop{false}, wake{false};
  std::thread loop([&] { labeller.run(stop, wake); });

  auto node = test::wait_for(api, kPath, [](const json& n) {
    return label(n, "nvidia.com/gpu.product") == "NVIDIA-H200-SHARED";
  });
  EXPECT_EQ(label(node, "nvidia.com/gpu.replicas"), "4");
  EXPECT_EQ(label(node, "nvidia.com/gpu.sharing-strategy"), "time-slicing");
  EXPECT_EQ(label(node, "nvidia.com/gpu.count"), "2");
  EXPECT_EQ(label(node, "team"), "a");
  const json ann = node["metadata"]["annotations"];
  EXPECT_NE(ann.value(kOwnedLabelsAnnotation, "").find("nvidia.com/gpu.replicas"),
            std::string::npos);
  EXPECT_EQ(json::parse(ann.value(kTopologyAnnotation, "{}"))["nvlink_islands"],
            json::parse("[[0,1]]"));

  const auto changed = std::chrono::steady_clock::now();
  replace_file(config, "version: v1\n");
  node = test::wait_for(
      api, kPath, [](const json& n) { return label(n, "nvidia.com/gpu.product") == "NVIDIA-H200"; },
      10s);
  EXPECT_LT(std::chrono::steady_clock::now() - changed, 10s);
  EXPECT_EQ(label(node, "nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(label(node, "nvidia.com/gpu.sharing-strategy"), "none");
  EXPECT_EQ(label(node, "team"), "a");

  // A config the host cannot take leaves the labels as they were.
  replace_file(config, "flags:\n  migStrategy: bogus\n");
  wake = true;
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(label(api.get(kPath), "nvidia.com/gpu.product"), "NVIDIA-H200");

  // The hardware changes (a host with MIG devices; SIGHUP asks for the refresh now) and the
  // config turns the mixed strategy on: the MIG labels appear; the strategy back to none
  // removes them, since the labeller owns them.
  {
    const std::lock_guard<std::mutex> lock(host_mutex);
    host_name = "h100-mig";
  }
  replace_file(config, "flags:\n  migStrategy: mixed\n");
  wake = true;
  node = test::wait_for(
      api, kPath, [](const json& n) { return label(n, "nvidia.com/mig-3g.40gb.count") == "3"; });
  EXPECT_EQ(label(node, "nvidia.com/mig.strategy"), "mixed");
  EXPECT_EQ(label(node, "nvidia.com/gpu.count"), "1");
  replace_file(config, "version: v1\n");
  node = test::wait_for(api, kPath, [](const json& n) {
    return label(n, "nvidia.com/mig-3g.40gb.count") == "<absent>";
  });
  EXPECT_EQ(label(node, "nvidia.com/mig-1g.10gb.product"), "<absent>");
  EXPECT_EQ(label(node, "nvidia.com/gpu.count"), "3");
  EXPECT_EQ(label(node, "team"), "a");
  stop = true;
  loop.join();

  // The verb, once: sharing back on.
  replace_file(config, kTimeSlicing4);
  const auto r =
      test::run_cli({"node-labeller", "--once", "--kubeconfig", plane.kubeconfig(), "--node-name",
                     kNode, "--config-file", config, "--topology", test::topo_json_path("h200-vm")},
                    dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(label(api.get(kPath), "nvidia.com/gpu.product"), "NVIDIA-H200-SHARED");
}

}  // namespace
}  // namespace gpuorch::k8s

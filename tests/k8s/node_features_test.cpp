// The node labeller's labels on recorded hosts, as NVIDIA's GPU Feature Discovery writes them
// (docs/labeller.md): no sharing, time-slicing replicas 4 (renamed and not), MPS, MIG single and
// mixed (also with a shared MIG profile); the topology annotation; and the merge patch that keeps
// a Node's labels true (owned labels no longer true removed, other labels untouched).
#include "gpuorch/k8s/labeller/node_features.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "gpuorch/base/error.hpp"
#include "gpuorch/k8s/labeller/node_labeller.hpp"
#include "gpuorch/k8s/manifests/manifests.hpp"
#include "k8s/k8s_support.hpp"
#include "support/paths.hpp"

namespace gpuorch::k8s {
namespace {

using Map = std::map<std::string, std::string>;

Map labels(const topology::Host& host, const std::string& yaml) {
  const auto f = node_features(host, parse_config(yaml, "config.yaml"));
  return Map(f.labels.begin(), f.labels.end());
}

std::string at(const Map& m, const std::string& key) {
  const auto it = m.find(key);
  return it == m.end() ? "<absent>" : it->second;
}

const char* kTimeSlicing4 =
    "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n";

// The recorded H200 VM with every GPU split into seven 1g.18gb MIG devices.
topology::Host h200_mig_single() {
  auto host = test::fixture_host("h200-vm");
  for (auto& g : host.gpus) {
    g.mig.enabled = true;
    for (int i = 0; i < 7; ++i) {
      g.mig.instances.push_back(
          {7 + i, 0, "1g.18gb", fmt::format("MIG-{}-{}", g.uuid, i), 16384, std::nullopt});
    }
  }
  return host;
}

TEST(NodeFeatures, NoSharingOnTheH200) {
  const auto m = labels(test::fixture_host("h200-vm"), "version: v1\n");
  EXPECT_EQ(at(m, "nvidia.com/gpu.product"), "NVIDIA-H200");
  EXPECT_EQ(at(m, "nvidia.com/gpu.count"), "2");
  EXPECT_EQ(at(m, "nvidia.com/gpu.memory"), "143771");
  EXPECT_EQ(at(m, "nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(at(m, "nvidia.com/gpu.sharing-strategy"), "none");
  EXPECT_EQ(at(m, "nvidia.com/gpu.family"), "hopper");
  EXPECT_EQ(at(m, "nvidia.com/gpu.compute.major"), "9");
  EXPECT_EQ(at(m, "nvidia.com/cuda.driver.major"), "580");
  EXPECT_EQ(at(m, "nvidia.com/cuda.runtime.major"), "13");
  EXPECT_EQ(at(m, "nvidia.com/mig.capable"), "true");
  EXPECT_EQ(at(m, "nvidia.com/mps.capable"), "false");
  EXPECT_EQ(at(m, "nvidia.com/mig.strategy"), "none");
  EXPECT_EQ(at(m, "gpuorch.io/nvlink.islands"), "1");
  EXPECT_EQ(at(m, "gpuorch.io/nvlink.largest-island"), "2");
}

TEST(NodeFeatures, TimeSlicingReplicasFourMarksTheProductShared) {
  const auto host = test::fixture_host("h200-vm");
  const auto m = labels(host, kTimeSlicing4);
  EXPECT_EQ(at(m, "nvidia.com/gpu.product"), "NVIDIA-H200-SHARED");
  EXPECT_EQ(at(m, "nvidia.com/gpu.count"), "2");  // physical GPUs, not replicas
  EXPECT_EQ(at(m, "nvidia.com/gpu.replicas"), "4");
  EXPECT_EQ(at(m, "nvidia.com/gpu.sharing-strategy"), "time-slicing");
  // A renamed shared resource (nvidia.com/gpu.shared) is told apart by its name: no suffix.
  const auto renamed =
      labels(host,
             "sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
             "    - name: nvidia.com/gpu\n      replicas: 4\n");
  EXPECT_EQ(at(renamed, "nvidia.com/gpu.product"), "NVIDIA-H200");
  EXPECT_EQ(at(renamed, "nvidia.com/gpu.replicas"), "4");
}

TEST(NodeFeatures, MpsSharing) {
  const auto m = labels(test::fixture_host("dgx-h100"),
                        "sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n"
                        "      replicas: 2\n");
  EXPECT_EQ(at(m, "nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3-SHARED");
  EXPECT_EQ(at(m, "nvidia.com/gpu.count"), "8");
  EXPECT_EQ(at(m, "nvidia.com/gpu.replicas"), "2");
  EXPECT_EQ(at(m, "nvidia.com/gpu.sharing-strategy"), "mps");
  EXPECT_EQ(at(m, "nvidia.com/mps.capable"), "true");
}

TEST(NodeFeatures, MigSingleDescribesTheMigDevices) {
  const auto m = labels(h200_mig_single(), "flags:\n  migStrategy: single\n");
  EXPECT_EQ(at(m, "nvidia.com/mig.strategy"), "single");
  EXPECT_EQ(at(m, "nvidia.com/gpu.product"), "NVIDIA-H200-MIG-1g.18gb");
  EXPECT_EQ(at(m, "nvidia.com/gpu.count"), "14");
  EXPECT_EQ(at(m, "nvidia.com/gpu.memory"), "16384");
  EXPECT_EQ(at(m, "nvidia.com/gpu.slices.gi"), "1");
  EXPECT_EQ(at(m, "nvidia.com/gpu.slices.ci"), "1");
  EXPECT_EQ(at(m, "nvidia.com/gpu.replicas"), "1");
  // Under none the same host is two whole GPUs.
  const auto none = labels(h200_mig_single(), "version: v1\n");
  EXPECT_EQ(at(none, "nvidia.com/gpu.count"), "2");
  EXPECT_EQ(at(none, "nvidia.com/gpu.slices.gi"), "<absent>");
  // This host says nothing of SMs and engines (no NVML attributes): no label rather than a guess.
  EXPECT_EQ(at(m, "nvidia.com/gpu.multiprocessors"), "<absent>");
  EXPECT_EQ(at(m, "nvidia.com/gpu.engines.copy"), "<absent>");
}

TEST(NodeFeatures, MigMixedLabelsEachProfile) {
  const auto host = test::fixture_host("h100-mig");
  const auto m = labels(host, "flags:\n  migStrategy: mixed\n");
  EXPECT_EQ(at(m, "nvidia.com/mig.strategy"), "mixed");
  // GPU 2 is not in MIG mode: it stays a whole nvidia.com/gpu.
  EXPECT_EQ(at(m, "nvidia.com/gpu.count"), "1");
  EXPECT_EQ(at(m, "nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  // The 1c.3g.40gb compute instance is not registered by the plugin, so it is not counted.
  EXPECT_EQ(at(m, "nvidia.com/mig-3g.40gb.count"), "3");
  EXPECT_EQ(at(m, "nvidia.com/mig-3g.40gb.memory"), "40192");
  EXPECT_EQ(at(m, "nvidia.com/mig-3g.40gb.product"), "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb");
  EXPECT_EQ(at(m, "nvidia.com/mig-3g.40gb.slices.gi"), "3");
  // SMs and engines as NVML gives them for the device (the fixture's attributes): GFD's labels.
  EXPECT_EQ(at(m, "nvidia.com/mig-3g.40gb.multiprocessors"), "60");
  EXPECT_EQ(at(m, "nvidia.com/mig-3g.40gb.slices.ci"), "3");
  EXPECT_EQ(at(m, "nvidia.com/mig-3g.40gb.engines.copy"), "3");
  EXPECT_EQ(at(m, "nvidia.com/mig-3g.40gb.engines.decoder"), "3");
  EXPECT_EQ(at(m, "nvidia.com/mig-3g.40gb.engines.encoder"), "0");
  EXPECT_EQ(at(m, "nvidia.com/mig-3g.40gb.engines.jpeg"), "3");
  EXPECT_EQ(at(m, "nvidia.com/mig-3g.40gb.engines.ofa"), "0");
  EXPECT_EQ(at(m, "nvidia.com/mig-1g.10gb.multiprocessors"), "16");
  EXPECT_EQ(at(m, "nvidia.com/mig-2g.20gb.count"), "1");
  EXPECT_EQ(at(m, "nvidia.com/mig-1g.10gb.count"), "2");
  EXPECT_EQ(at(m, "nvidia.com/mig-1g.10gb.replicas"), "1");
  EXPECT_EQ(at(m, "nvidia.com/mig-1g.10gb.sharing-strategy"), "none");
  // One profile time-sliced: only its labels say so.
  const auto shared =
      labels(host,
             "flags:\n  migStrategy: mixed\nsharing:\n  timeSlicing:\n"
             "    resources:\n    - name: nvidia.com/mig-1g.10gb\n      replicas: 4\n");
  EXPECT_EQ(at(shared, "nvidia.com/mig-1g.10gb.product"),
            "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED");
  EXPECT_EQ(at(shared, "nvidia.com/mig-1g.10gb.replicas"), "4");
  EXPECT_EQ(at(shared, "nvidia.com/mig-1g.10gb.sharing-strategy"), "time-slicing");
  EXPECT_EQ(at(shared, "nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(at(shared, "nvidia.com/mig-3g.40gb.product"), "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb");
}

// docs/labeller.md's MIG mixed table (the recorded DGX H100) row by row: `label` | `value` | =.
TEST(NodeFeatures, DocsMigMixedTableIsWhatTheLabellerWrites) {
  std::ifstream in(std::filesystem::path(test::source_dir()) / "docs" / "labeller.md");
  std::string line;
  while (std::getline(in, line) && line.rfind("**MIG mixed**", 0) != 0) {
  }
  while (std::getline(in, line) && line.rfind("| label |", 0) != 0) {
  }
  const auto m = labels(test::fixture_host("dgx-h100"), "flags:\n  migStrategy: mixed\n");
  const std::regex row(R"(^\| `([^`]+)` \| `([^`]+)` \| = \|$)");
  int checked = 0;
  while (std::getline(in, line) && line.rfind('|', 0) == 0) {
    std::smatch r;
    if (!std::regex_match(line, r, row)) continue;  // the header's rule
    EXPECT_EQ(at(m, r[1]), r[2]) << line;
    ++checked;
  }
  EXPECT_GE(checked, 40) << "the table was not found or lost rows";
}

TEST(NodeFeatures, ConfigThatCannotApplyIsBadInput) {
  // Single over three profiles and a GPU outside MIG mode: the plugin refuses it, so does GFD.
  EXPECT_THROW(labels(test::fixture_host("h100-mig"), "flags:\n  migStrategy: single\n"),
               base::InputError);
}

TEST(NodeFeatures, TopologyAnnotationNamesIslandsAndNuma) {
  const auto f = node_features(test::fixture_host("h100-mig"), PluginConfig{});
  ASSERT_EQ(f.annotations.size(), 1u);
  EXPECT_EQ(f.annotations[0].first, kTopologyAnnotation);
  const auto j = nlohmann::json::parse(f.annotations[0].second);
  EXPECT_EQ(j["nvlink_islands"], nlohmann::json::parse("[[0,1,2]]"));
  EXPECT_EQ(j["gpus"][2]["numa_node"], 1);
  EXPECT_EQ(j["gpus"][0]["uuid"], "GPU-64bbca15-1776-feaf-35c7-c0761cd05691");
  // Two T4s on PCIe: two islands of one.
  EXPECT_EQ(nvlink_islands(test::fixture_host("t4x2")), (std::vector<std::vector<int>>{{0}, {1}}));
}

// The annotation carries the host's GPU link matrix, exactly the node spec's (what
// `gpuorch topo --node-spec` writes and the device plugin scores by), read back whole by the
// scheduler; small enough for a Node's annotations (256 KiB in all) at 8 GPUs.
TEST(NodeFeatures, TopologyAnnotationCarriesTheLinkMatrix) {
  const auto host = test::fixture_host("dgx-h100");
  const auto f = node_features(host, PluginConfig{});
  ASSERT_EQ(f.annotations.size(), 1u);
  const std::string& text = f.annotations[0].second;
  const auto j = nlohmann::json::parse(text);
  ASSERT_EQ(j["links"].size(), 8u);
  EXPECT_EQ(j["links"][0][0], 0);
  EXPECT_EQ(j["links"][0][1], 137) << "NV18, one NUMA node (docs/topology.md)";
  EXPECT_EQ(j["links"][0][7], 136) << "NV18 across NUMA nodes";
  EXPECT_EQ(j["nvlink_islands"], nlohmann::json::parse("[[0,1,2,3,4,5,6,7]]"));
  EXPECT_EQ(annotated_gpu_links(text, 8), topology::node_spec(host).gpu_links);
  EXPECT_LT(text.size(), 2048u);
  // A host whose links nobody knows gives no matrix (the node spec has none either).
  auto unknown = test::fixture_host("t4x2");
  unknown.links.clear();
  ASSERT_TRUE(topology::node_spec(unknown).gpu_links.empty());
  const auto u =
      nlohmann::json::parse(node_features(unknown, PluginConfig{}).annotations[0].second);
  EXPECT_FALSE(u.contains("links"));
  EXPECT_EQ(u["gpus"].size(), 2u);
}

TEST(NodeLabels, PatchRemovesOnlyOwnedLabelsNoLongerTrue) {
  const auto host = test::fixture_host("h200-vm");
  const auto shared = node_features(host, parse_config(kTimeSlicing4, "c.yaml"));
  nlohmann::json node = {{"metadata", {{"name", "n"}, {"labels", {{"team", "a"}}}}}};
  LabelChange change;
  auto patch = labels_patch(node, shared, change);
  ASSERT_FALSE(patch.is_null());
  EXPECT_EQ(patch["metadata"]["labels"]["nvidia.com/gpu.product"], "NVIDIA-H200-SHARED");
  EXPECT_FALSE(patch["metadata"]["labels"].contains("team"));
  EXPECT_TRUE(change.removed.empty());
  node.merge_patch(patch);
  // Applied: nothing left to write.
  EXPECT_TRUE(labels_patch(node, shared, change).is_null());
  EXPECT_TRUE(change.empty());
  // Sharing switched off, and a label the labeller no longer writes is dropped.
  auto unshared = node_features(host, PluginConfig{});
  std::erase_if(unshared.labels, [](const auto& kv) { return kv.first == "gpuorch.io/cpu.count"; });
  patch = labels_patch(node, unshared, change);
  EXPECT_EQ(patch["metadata"]["labels"]["nvidia.com/gpu.product"], "NVIDIA-H200");
  EXPECT_EQ(patch["metadata"]["labels"]["nvidia.com/gpu.replicas"], "1");
  EXPECT_TRUE(patch["metadata"]["labels"]["gpuorch.io/cpu.count"].is_null());
  EXPECT_EQ(change.removed, (std::vector<std::string>{"gpuorch.io/cpu.count"}));
  node.merge_patch(patch);
  EXPECT_FALSE(node["metadata"]["labels"].contains("gpuorch.io/cpu.count"));
  EXPECT_EQ(node["metadata"]["labels"]["team"], "a");
}

TEST(NodeLabeller, DaemonSetRunsTheVerbWithThePluginConfig) {
  ManifestOptions o;
  o.sharing = SharingKind::kTimeSlicing;
  for (const auto& m : make_manifests(o)) {
    if (m.object["kind"] != "DaemonSet" ||
        m.object["metadata"]["name"] != "gpuorch-node-labeller") {
      continue;
    }
    const auto& pod = m.object["spec"]["template"]["spec"];
    const auto& c = pod["containers"][0];
    EXPECT_EQ(c["args"], nlohmann::ordered_json::parse(R"(["node-labeller", "--interval", "60",
        "--config-file", "/etc/gpuorch/config.yaml"])"));
    EXPECT_EQ(c["image"], o.image);
    EXPECT_EQ(pod["volumes"][0]["configMap"]["name"], "gpuorch-device-plugin-nvidia");
    EXPECT_EQ(pod["serviceAccountName"], "gpuorch-node-labeller");
    EXPECT_FALSE(pod.contains("initContainers"));
    return;
  }
  ADD_FAILURE() << "no labeller DaemonSet";
}

}  // namespace
}  // namespace gpuorch::k8s

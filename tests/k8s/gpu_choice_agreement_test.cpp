// The scheduler, the device plugin and the launcher pick the same GPUs for one request: all three
// read topology::gpu_link_scores through the scheduler core's GPU picker. On every recorded host
// under tests/fixtures (sysfs recordings and topology JSON files; ../shared's too when it holds
// any), for every request size and several occupancies, the scheduler's choice (the node spec
// built from the host, efd's GPUs through Scheduler::schedule, as `gpuorch scheduler` runs it)
// is the device plugin's preferred allocation with every free GPU offered; on an empty host the
// launcher's ranks take that set too. On Kubernetes too: the host's Node object as the node
// labeller leaves it (the link matrix in its topology annotation), read by node_from_json and
// scheduled through k8s::ClusterMirror as `gpuorch scheduler` and `gpuorch extender` do.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "gpuorch/k8s/deviceplugin/preferred.hpp"
#include "gpuorch/k8s/labeller/node_labeller.hpp"
#include "gpuorch/k8s/mirror/cluster_mirror.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"
#include "gpuorch/launch/plan.hpp"
#include "gpuorch/topology/json_read.hpp"
#include "gpuorch/topology/labels.hpp"
#include "gpuorch/topology/link_scores.hpp"
#include "gpuorch/workload/target_workload.hpp"
#include "support/paths.hpp"
#include "support/policy_bench.hpp"
#include "topology/fixture_hosts.hpp"

namespace gpuorch {
namespace {

namespace fs = std::filesystem;

struct RecordedHost {
  std::string name;  // the recording's path
  topology::Host host;
};

bool is_topology_json(const fs::path& p) {
  if (p.extension() != ".json") return false;
  std::ifstream in(p, std::ios::binary);
  std::string head(256, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head.find("\"gpuorch.topology/v1\"") != std::string::npos;
}

// A `gpuorch topo --record` folder (what `--sysfs-root` reads), not searched further: its
// expected/topo.json is the same host.
bool is_recording(const fs::path& dir) { return fs::is_directory(dir / "sys/bus/pci/devices"); }

void collect(const fs::path& root, std::vector<RecordedHost>& out) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const fs::path& p = it->path();
    if (it->is_directory() && is_recording(p)) {
      out.push_back({p.string(), testing::discover_fixture(p).host});
      it.disable_recursion_pending();
    } else if (it->is_regular_file() && is_topology_json(p)) {
      out.push_back({p.string(), topology::load_host_json(p.string())});
    }
  }
}

std::vector<RecordedHost> recorded_hosts() {
  std::vector<RecordedHost> hosts;
  collect(test::fixtures_dir(), hosts);
  collect(test::shared_dir(), hosts);
  std::sort(hosts.begin(), hosts.end(),
            [](const RecordedHost& a, const RecordedHost& b) { return a.name < b.name; });
  return hosts;
}

// What efd (gpuorch scheduler's default policy) knows of past pods: whole-GPU pods of each size.
std::vector<workload::PodSpec> past_pods() {
  std::vector<workload::PodSpec> past;
  for (const int g : {1, 2, 4, 8}) past.push_back(test::pod("h", 1000, g, 1000));
  return past;
}

workload::TargetWorkload history() { return workload::typical_pods(past_pods(), 1.0); }

// The scheduler core's GPUs for a `count`-GPU pod on the host's node with `taken` GPUs in use.
std::vector<int> scheduler_choice(const topology::Host& host, const std::vector<int>& taken,
                                  int count) {
  test::PolicyBench b("efd", {topology::node_spec(host)}, {}, 1, history());
  if (!taken.empty()) b.apply(0, 1000, 1000, taken);
  const auto d = b.scheduler.schedule(b.req(1000, count, 1000));
  EXPECT_EQ(d.outcome, sched::Outcome::kPlaced);
  std::vector<int> gpus = d.placement.gpus;
  std::sort(gpus.begin(), gpus.end());
  return gpus;
}

// The host's Node as the cluster shows it: the device plugin's allocatable (its one resource, a
// device per GPU; CPU and memory to spare) and what the node labeller patches onto it (labels,
// the topology annotation with the link matrix), with or without that annotation.
nlohmann::json node_object(const topology::Host& host, bool annotated = true) {
  const auto resources = k8s::plan_resources(host, k8s::PluginConfig{});
  EXPECT_EQ(resources.size(), 1u);
  nlohmann::json node = {
      {"metadata", {{"name", "gpu-node"}}},
      {"status",
       {{"allocatable",
         {{"cpu", "1000"},
          {"memory", "4Ti"},
          {"pods", "110"},
          {resources.front().name, std::to_string(resources.front().devices.size())}}}}}};
  k8s::LabelChange change;
  node.merge_patch(k8s::labels_patch(node, k8s::node_features(host, k8s::PluginConfig{}), change));
  if (!annotated) node["metadata"]["annotations"].erase(k8s::kTopologyAnnotation);
  return node;
}

k8s::PodObject pod_object(const std::string& uid, int gpus, const std::string& node = "",
                          std::vector<int> annotated = {}) {
  k8s::PodObject p;
  p.uid = uid;
  p.ns = "default";
  p.name = uid;
  p.node_name = node;
  p.spec = test::pod("default/" + uid, 1000, gpus, 1000);
  p.gpus = std::move(annotated);
  return p;
}

// `gpuorch scheduler`'s (and the extender's) GPUs for a `count`-GPU pod on the Node: the Node read
// by node_from_json, the cluster and efd in k8s::ClusterMirror, `taken` held by a bound pod that
// carries them in gpuorch.io/gpus.
std::vector<int> kubernetes_choice(const nlohmann::json& node_json, const std::vector<int>& taken,
                                   int count) {
  const auto parsed = k8s::node_from_json(node_json);
  const auto* node = std::get_if<cluster::NodeSpec>(&parsed);
  EXPECT_NE(node, nullptr) << std::get<std::string>(parsed);
  if (node == nullptr) return {};
  k8s::ClusterMirror mirror(k8s::MirrorOptions{"efd", 42, past_pods(), {}});
  mirror.set_nodes({{node->name, *node}});
  mirror.ensure_built({});
  if (!taken.empty()) {
    EXPECT_TRUE(
        mirror.account(pod_object("taken", static_cast<int>(taken.size()), node->name, taken)));
  }
  const auto r = mirror.schedule(pod_object("pending", count));
  EXPECT_EQ(r.decision.outcome, sched::Outcome::kPlaced);
  std::vector<int> gpus = r.decision.placement.gpus;
  std::sort(gpus.begin(), gpus.end());
  return gpus;
}

// The device plugin's preferred allocation with every GPU but `taken` offered, as GPU indices.
std::vector<int> plugin_choice(const topology::Host& host, const std::vector<int>& taken,
                               int count) {
  const auto resources = k8s::plan_resources(host, k8s::PluginConfig{});
  EXPECT_EQ(resources.size(), 1u);
  if (resources.empty()) return {};
  const k8s::Resource& r = resources.front();
  EXPECT_EQ(r.physical.size(), host.gpus.size()) << "whole GPUs, one device each";
  std::vector<std::string> offered;
  for (const auto& d : r.devices) {
    const int gpu = r.physical[static_cast<std::size_t>(d.physical)].gpu;
    if (std::find(taken.begin(), taken.end(), gpu) == taken.end()) offered.push_back(d.id);
  }
  std::vector<int> gpus;
  for (const auto& id : k8s::preferred_allocation(host, r, offered, {}, count)) {
    gpus.push_back(k8s::find_physical(r, id)->gpu);
  }
  std::sort(gpus.begin(), gpus.end());
  return gpus;
}

// The launcher's GPUs for `count` ranks (the host is all its own).
std::vector<int> launcher_choice(const topology::Host& host, int count) {
  launch::PlanRequest req;
  req.nproc = count;
  req.bind = launch::BindMode::kNone;
  std::vector<int> gpus;
  for (const auto& rank : launch::make_plan(host, req).ranks) {
    for (std::size_t g = 0; g < host.gpus.size(); ++g) {
      if (host.gpus[g].index == rank.gpu) gpus.push_back(static_cast<int>(g));
    }
  }
  std::sort(gpus.begin(), gpus.end());
  return gpus;
}

// Empty, one GPU taken at either end, two apart, every other GPU.
std::vector<std::vector<int>> occupancies(int n) {
  std::vector<std::vector<int>> out = {{}, {0}, {n - 1}, {1, n / 2}, {}};
  for (int g = 0; g < n; g += 2) out.back().push_back(g);
  std::vector<std::vector<int>> valid;
  for (auto& taken : out) {
    std::sort(taken.begin(), taken.end());
    taken.erase(std::unique(taken.begin(), taken.end()), taken.end());
    const bool fits = std::all_of(taken.begin(), taken.end(), [&](int g) { return g < n; });
    if (fits && static_cast<int>(taken.size()) < n &&
        std::find(valid.begin(), valid.end(), taken) == valid.end()) {
      valid.push_back(taken);
    }
  }
  return valid;
}

std::string text(const std::vector<int>& v) {
  std::string s = "{";
  for (const int g : v) s += (s.size() > 1 ? "," : "") + std::to_string(g);
  return s + "}";
}

TEST(GpuChoiceAgreement, SchedulerAndDevicePluginOnEveryRecordedHost) {
  const auto hosts = recorded_hosts();
  ASSERT_GE(hosts.size(), 6u) << "4 recordings under tests/fixtures/topo, 2 topology JSON files";
  int compared = 0;
  for (const auto& [name, host] : hosts) {
    SCOPED_TRACE(name);
    const int n = static_cast<int>(host.gpus.size());
    for (const auto& taken : occupancies(n)) {
      for (int count = 1; count + static_cast<int>(taken.size()) <= n; ++count) {
        SCOPED_TRACE(::testing::Message() << "taken " << text(taken) << ", " << count << " GPUs");
        const auto scheduled = scheduler_choice(host, taken, count);
        EXPECT_EQ(text(plugin_choice(host, taken, count)), text(scheduled));
        if (taken.empty()) {
          EXPECT_EQ(text(launcher_choice(host, count)), text(scheduled));
        }
        ++compared;
      }
    }
  }
  // The six recordings under tests/fixtures alone: 32 (DGX H100) + 14 (MI250) + 10 (the MIG
  // H100) + 4 each for the two-GPU hosts.
  EXPECT_GE(compared, 68);
}

// On Kubernetes, Node objects carry no link data but the node labeller's annotation: with it,
// `gpuorch scheduler` and the extender (node_from_json, then ClusterMirror) pick the device
// plugin's GPUs on every recorded host, for every request size and the occupancies above.
TEST(GpuChoiceAgreement, SchedulerOnKubernetesAndDevicePluginOnEveryRecordedHost) {
  const auto hosts = recorded_hosts();
  ASSERT_GE(hosts.size(), 6u);
  int compared = 0;
  for (const auto& [name, host] : hosts) {
    SCOPED_TRACE(name);
    const nlohmann::json node = node_object(host);
    const auto parsed = k8s::node_from_json(node);
    ASSERT_TRUE(std::holds_alternative<cluster::NodeSpec>(parsed));
    EXPECT_EQ(std::get<cluster::NodeSpec>(parsed).gpu_links, topology::node_spec(host).gpu_links)
        << "the annotation carries the node spec's matrix";
    const int n = static_cast<int>(host.gpus.size());
    for (const auto& taken : occupancies(n)) {
      for (int count = 1; count + static_cast<int>(taken.size()) <= n; ++count) {
        SCOPED_TRACE(::testing::Message() << "taken " << text(taken) << ", " << count << " GPUs");
        EXPECT_EQ(text(plugin_choice(host, taken, count)),
                  text(kubernetes_choice(node, taken, count)));
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 68);
}

// The case: GPUs 0 and 1 share a NUMA node and one NVLink, GPU 2 is on the other node
// with two NVLinks to GPU 0 (SYS to GPU 1). The old scheduler scale tied the pairs (110 each,
// lowest indices won: 0+1), the old plugin scale did not (105 vs 200: 0+2); now both, and the
// launcher, take 0+2.
topology::Host one_vs_two_nvlinks() {
  topology::Host h;
  h.hostname = "hand-built";
  h.logical_cpus = 8;
  h.memory_mib = 65536;
  h.numa_nodes = {{0, {0, 1, 2, 3}, 32768, {}}, {1, {4, 5, 6, 7}, 32768, {}}};
  for (int g = 0; g < 3; ++g) {
    topology::Gpu gpu;
    gpu.index = g;
    gpu.model = "NVIDIA H100 80GB HBM3";
    gpu.uuid = "GPU-hand-" + std::to_string(g);
    gpu.memory_mib = 81559;
    gpu.numa_node = g < 2 ? 0 : 1;
    gpu.local_cpus = h.numa_nodes[static_cast<std::size_t>(gpu.numa_node)].cpus;
    h.gpus.push_back(gpu);
  }
  using topology::Path;
  h.links = {{0, 1, Path::kNvLink, Path::kNode, 1, 0, 0},
             {0, 2, Path::kNvLink, Path::kSys, 2, 0, 0},
             {1, 2, Path::kSys, Path::kSys, 0, 0, 0}};
  return h;
}

TEST(GpuChoiceAgreement, TwoNvLinksAcrossNumaNodesBeatOneOnANode) {
  const topology::Host h = one_vs_two_nvlinks();
  EXPECT_GT(topology::gpu_link_score(h, 0, 2), topology::gpu_link_score(h, 0, 1));
  EXPECT_EQ(text(scheduler_choice(h, {}, 2)), "{0,2}");
  EXPECT_EQ(text(plugin_choice(h, {}, 2)), "{0,2}");
  EXPECT_EQ(text(launcher_choice(h, 2)), "{0,2}");
  // On Kubernetes, the same through the labeller's annotation; a Node without it (no labeller)
  // gets the lowest free GPUs, which the plugin would not have chosen.
  EXPECT_EQ(text(kubernetes_choice(node_object(h), {}, 2)), "{0,2}");
  EXPECT_EQ(text(kubernetes_choice(node_object(h, false), {}, 2)), "{0,1}");
}

}  // namespace
}  // namespace gpuorch

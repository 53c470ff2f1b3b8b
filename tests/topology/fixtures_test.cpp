// The four recorded hosts: each must give the expected matrix, JSON, labels and node spec.
#include <gtest/gtest.h>

#include "fixture_hosts.hpp"
#include "gpuorch/io/inventory.hpp"
#include "gpuorch/topology/json.hpp"
#include "gpuorch/topology/labels.hpp"
#include "gpuorch/topology/matrix.hpp"

namespace gpuorch {
namespace {

using testing::discover_fixture;
using testing::golden;
using testing::topo_fixture;
using topology::Host;

std::string cell(const Host& h, std::size_t a, std::size_t b) {
  const auto* l = h.link(a, b);
  return l ? topology::to_string(l->path, l->nvlinks) : "?";
}

std::string label(const Host& h, const std::string& key) {
  for (const auto& [k, v] : topology::node_labels(h)) {
    if (k == key) return v;
  }
  return "<absent>";
}

class FixtureHost : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureHost, MatchesGoldenOutputs) {
  const std::string host = GetParam();
  const auto d = discover_fixture(topo_fixture(host));
  EXPECT_TRUE(d.problems.empty()) << d.problems.front();
  const std::string matrix = topology::render_matrix(d.host);
  EXPECT_EQ(matrix, golden(host, "matrix.txt", matrix));
  const std::string json = topology::to_json_text(topology::to_json(d.host)) + "\n";
  EXPECT_EQ(json, golden(host, "topo.json", json));
  std::string labels;
  for (const auto& [k, v] : topology::node_labels(d.host)) labels += k + "=" + v + "\n";
  EXPECT_EQ(labels, golden(host, "labels.txt", labels));
  const std::string yaml = topology::inventory_yaml(topology::node_spec(d.host));
  EXPECT_EQ(yaml, golden(host, "node-spec.yaml", yaml));
}

// The node spec survives the YAML inventory loader: a live host and an inventory give one node.
TEST_P(FixtureHost, NodeSpecRoundTripsThroughInventory) {
  const auto d = discover_fixture(topo_fixture(GetParam()));
  const auto spec = topology::node_spec(d.host);
  const auto nodes = io::parse_inventory(topology::inventory_yaml(spec), "node-spec.yaml");
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].cpu_milli, spec.cpu_milli);
  EXPECT_EQ(nodes[0].memory_mib, spec.memory_mib);
  EXPECT_EQ(nodes[0].gpu_count, spec.gpu_count);
  EXPECT_EQ(nodes[0].gpu_model, spec.gpu_model);
  EXPECT_EQ(nodes[0].gpu_memory_mib, spec.gpu_memory_mib);
  EXPECT_EQ(nodes[0].gpu_links, spec.gpu_links);
  auto a = nodes[0].labels, b = spec.labels;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
}

// hwloc's PCI tree and the sysfs paths must agree: drop hwloc.xml and nothing in the matrix moves.
TEST_P(FixtureHost, SysfsFallbackGivesTheSameMatrix) {
  const std::string host = GetParam();
  const testing::TreeCopy copy(host, "nohwloc");
  std::filesystem::remove(copy.dir() / "hwloc.xml");
  const auto with = discover_fixture(topo_fixture(host));
  const auto without = discover_fixture(copy.dir());
  EXPECT_TRUE(without.problems.empty());
  auto strip = [](std::string m) {
    // The fallback adds one note; sockets come from hwloc only.
    const auto at = m.find("NUMA nodes");
    m = m.substr(0, at);
    const auto first = m.find('\t');
    return first == std::string::npos ? m : m.substr(first);
  };
  EXPECT_EQ(strip(topology::render_matrix(without.host)),
            strip(topology::render_matrix(with.host)));
  for (std::size_t i = 0; i < with.host.numa_nodes.size(); ++i) {
    EXPECT_EQ(without.host.numa_nodes[i].cpus, with.host.numa_nodes[i].cpus);
  }
}

INSTANTIATE_TEST_SUITE_P(Topo, FixtureHost,
                         ::testing::Values("dgx-h100", "mi250", "t4x2", "h200-vm"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(TopoFixtures, DgxH100) {
  const auto d = discover_fixture(topo_fixture("dgx-h100"));
  const Host& h = d.host;
  ASSERT_EQ(h.gpus.size(), 8u);
  ASSERT_EQ(h.nics.size(), 8u);
  ASSERT_EQ(h.numa_nodes.size(), 2u);
  EXPECT_EQ(h.logical_cpus, 224);
  EXPECT_EQ(h.packages, 2);
  for (std::size_t a = 0; a < 8; ++a) {
    for (std::size_t b = a + 1; b < 8; ++b) EXPECT_EQ(cell(h, a, b), "NV18") << a << "-" << b;
    // Each GPU shares a PCIe switch with its NIC; the other NICs of its socket are NODE.
    for (std::size_t n = 0; n < 8; ++n) {
      const std::string want = n == a ? "PIX" : (n / 4 == a / 4 ? "NODE" : "SYS");
      EXPECT_EQ(cell(h, a, 8 + n), want) << "GPU" << a << " NIC" << n;
    }
  }
  EXPECT_EQ(topology::cpu_affinity(h, h.gpus[0]), "0-55,112-167");
  EXPECT_EQ(topology::cpu_affinity(h, h.gpus[7]), "56-111,168-223");
  EXPECT_EQ(topology::numa_affinity(h, h.gpus[5]), "1");
  EXPECT_EQ(h.gpus[0].memory_mib, 81559);
  EXPECT_TRUE(h.gpus[7].mig.enabled);
  ASSERT_EQ(h.gpus[7].mig.instances.size(), 3u);
  EXPECT_EQ(h.gpus[7].mig.instances[0].profile, "3g.40gb");
  EXPECT_EQ(h.nics[3].ports.at(0).rate_gbps, 400);
  EXPECT_EQ(label(h, "nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(label(h, "nvidia.com/gpu.count"), "8");
  EXPECT_EQ(label(h, "nvidia.com/gpu.memory"), "81559");
  EXPECT_EQ(label(h, "nvidia.com/gpu.family"), "hopper");
  EXPECT_EQ(label(h, "nvidia.com/mig.capable"), "true");
  EXPECT_EQ(label(h, "gpuorch.io/gpu.interconnect"), "NV18");
  EXPECT_EQ(topology::node_spec(h).gpu_model, "H100-80GB-HBM3");
}

TEST(TopoFixtures, Mi250) {
  const Host h = discover_fixture(topo_fixture("mi250")).host;
  ASSERT_EQ(h.gpus.size(), 4u);
  for (std::size_t a = 0; a < 4; ++a) {
    for (std::size_t b = a + 1; b < 4; ++b) {
      EXPECT_EQ(cell(h, a, b), "XGMI");
      // The two dies of one MI250 package are closer (weight 15) than dies across packages.
      EXPECT_EQ(h.link(a, b)->xgmi_weight, a / 2 == b / 2 ? 15 : 30);
    }
  }
  EXPECT_EQ(cell(h, 0, 4), "NODE");
  EXPECT_EQ(cell(h, 2, 4), "SYS");
  EXPECT_EQ(h.gpus[0].gfx_target, "gfx90a");
  EXPECT_EQ(h.gpus[0].compute_units, 104);
  EXPECT_EQ(h.gpus[0].memory_mib, 65520);
  EXPECT_EQ(label(h, "amd.com/gpu.family"), "AI");
  EXPECT_EQ(label(h, "amd.com/gpu.vram"), "64G");
  EXPECT_EQ(label(h, "amd.com/gpu.product-name"), "AMD_Instinct_MI250");
  EXPECT_EQ(label(h, "beta.amd.com/gpu.cu-count.104"), "4");
}

TEST(TopoFixtures, T4TwoSockets) {
  const Host h = discover_fixture(topo_fixture("t4x2")).host;
  ASSERT_EQ(h.gpus.size(), 2u);
  EXPECT_EQ(cell(h, 0, 1), "SYS");
  EXPECT_EQ(cell(h, 0, 2), "NODE");
  EXPECT_EQ(cell(h, 1, 2), "SYS");
  EXPECT_EQ(topology::cpu_affinity(h, h.gpus[1]), "16-31,48-63");
  EXPECT_EQ(label(h, "nvidia.com/gpu.product"), "Tesla-T4");
  EXPECT_EQ(label(h, "nvidia.com/mig.capable"), "false");
  EXPECT_EQ(label(h, "gpuorch.io/rdma.link-layer"), "roce");
  EXPECT_EQ(topology::node_spec(h).gpu_model, "T4");
}

TEST(TopoFixtures, H200Vm) {
  const Host h = discover_fixture(topo_fixture("h200-vm")).host;
  ASSERT_EQ(h.gpus.size(), 2u);
  EXPECT_EQ(cell(h, 0, 1), "NV18");
  EXPECT_EQ(h.link(0, 1)->pcie, topology::Path::kPhb);
  // numa_node is -1 in the VM; the affinity comes from the CPUs the GPU is local to.
  EXPECT_EQ(h.gpus[0].numa_node, -1);
  EXPECT_EQ(topology::numa_affinity(h, h.gpus[0]), "0");
  EXPECT_EQ(topology::cpu_affinity(h, h.gpus[1]), "0-31");
  EXPECT_EQ(label(h, "nvidia.com/gpu.product"), "NVIDIA-H200");
  EXPECT_EQ(label(h, "nvidia.com/gpu.memory"), "143771");
}

// Without NVML the driver's procfs still names the GPUs and the PCIe matrix is unchanged; the
// missing pieces are said once.
TEST(TopoFixtures, ProcfsFallbackWithoutNvml) {
  const Host with = discover_fixture(topo_fixture("t4x2")).host;
  const auto d = discover_fixture(topo_fixture("t4x2"), /*nvml=*/false);
  const Host& h = d.host;
  ASSERT_EQ(h.gpus.size(), 2u);
  EXPECT_EQ(h.gpus[0].model, "Tesla T4");
  EXPECT_EQ(h.gpus[0].source, "procfs");
  EXPECT_EQ(h.gpus[1].uuid, with.gpus[1].uuid);
  EXPECT_EQ(h.driver_version, "535.104.05");
  for (std::size_t a = 0; a < h.device_count(); ++a) {
    for (std::size_t b = a + 1; b < h.device_count(); ++b)
      EXPECT_EQ(cell(h, a, b), cell(with, a, b));
  }
  int nvml_notes = 0;
  for (const auto& n : h.notes) nvml_notes += n.rfind("NVML not available", 0) == 0 ? 1 : 0;
  EXPECT_EQ(nvml_notes, 1);
  EXPECT_TRUE(d.problems.empty());
  // MIG instances still show from the driver's capability files.
  const Host dgx = discover_fixture(topo_fixture("dgx-h100"), false).host;
  EXPECT_EQ(dgx.gpus[7].mig.instances.size(), 3u);
  EXPECT_EQ(cell(dgx, 0, 8), "PIX");
}

}  // namespace
}  // namespace gpuorch

// The binding plan for the recorded fixture hosts, checked against expected tables.
#include "gpuorch/launch/plan.hpp"

#include <gtest/gtest.h>

#include "../launch/launch_support.hpp"
#include "../support/test_support.hpp"
#include "../topology/fixture_hosts.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/launch/plan_render.hpp"
#include "gpuorch/topology/json.hpp"
#include "gpuorch/topology/json_read.hpp"

namespace gpuorch::launch {
namespace {

using launch_test::golden;
using launch_test::topo_json;

Plan plan_for(const std::string& host, int nproc, BindMode bind) {
  PlanRequest r;
  r.nproc = nproc;
  r.bind = bind;
  return make_plan(topology::load_host_json(topo_json(host)), r);
}

struct Case {
  std::string host;
  int nproc;
  BindMode bind;
  std::string golden;
};

class PlanGolden : public ::testing::TestWithParam<Case> {};

TEST_P(PlanGolden, TableMatchesExpected) {
  const auto& c = GetParam();
  const auto table = render_plan_table(plan_for(c.host, c.nproc, c.bind));
  EXPECT_EQ(table, golden(c.golden, table));
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, PlanGolden,
    ::testing::Values(Case{"dgx-h100", 8, BindMode::kCores, "dgx-h100.cores.txt"},
                      Case{"dgx-h100", 4, BindMode::kNuma, "dgx-h100.numa4.txt"},
                      Case{"dgx-h100", 8, BindMode::kNone, "dgx-h100.none.txt"},
                      Case{"mi250", 4, BindMode::kCores, "mi250.cores.txt"},
                      Case{"t4x2", 2, BindMode::kCores, "t4x2.cores.txt"},
                      Case{"h200-vm", 2, BindMode::kCores, "h200-vm.cores.txt"}),
    [](const ::testing::TestParamInfo<Case>& p) {
      std::string n = p.param.golden.substr(0, p.param.golden.size() - 4);
      for (char& ch : n) {
        if (ch == '-' || ch == '.') ch = '_';
      }
      return n;
    });

TEST(Plan, JsonMatchesExpected) {
  const auto text = topology::to_json_text(plan_json(plan_for("dgx-h100", 8, BindMode::kCores)));
  EXPECT_EQ(text + "\n", golden("dgx-h100.cores.json", text + "\n"));
}

// A recorded tree (discovery) and its `topo --json` give the same plan.
TEST(Plan, RecordedTreeAndTopoJsonAgree) {
  for (const std::string host : {"dgx-h100", "mi250", "t4x2"}) {
    const auto d = testing::discover_fixture(testing::topo_fixture(host));
    PlanRequest r;
    r.nproc = static_cast<int>(d.host.gpus.size());
    EXPECT_EQ(render_plan_table(make_plan(d.host, r)),
              render_plan_table(plan_for(host, r.nproc, BindMode::kCores)))
        << host;
  }
}

TEST(Plan, SharesAreDisjointAndCoverTheNode) {
  const auto plan = plan_for("dgx-h100", 8, BindMode::kCores);
  topology::IdSet all;
  for (const auto& r : plan.ranks) {
    EXPECT_EQ(r.cores, 14);
    EXPECT_EQ(r.omp_threads, 14);
    EXPECT_EQ(r.cpus.size(), 28u);  // 14 cores with their SMT siblings
    all.insert(all.end(), r.cpus.begin(), r.cpus.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
  EXPECT_EQ(all.size(), 224u);
}

TEST(Plan, FewerRanksTakeBiggerShares) {
  // Ranks 0-3 are GPUs 0-3, all on NUMA node 0: 56 cores split in four.
  const auto plan = plan_for("dgx-h100", 2, BindMode::kCores);
  ASSERT_EQ(plan.ranks.size(), 2u);
  EXPECT_EQ(plan.ranks[0].cores, 28);
  EXPECT_EQ(topology::format_id_list(plan.ranks[0].cpus), "0-27,112-139");
  EXPECT_EQ(topology::format_id_list(plan.ranks[1].cpus), "28-55,140-167");
}

TEST(Plan, MoreRanksThanGpusNeedsBindNone) {
  const auto msg = test::input_error([] { plan_for("t4x2", 3, BindMode::kCores); });
  EXPECT_NE(msg.find("more ranks than GPUs (2)"), std::string::npos) << msg;
  const auto plan = plan_for("t4x2", 3, BindMode::kNone);
  EXPECT_EQ(plan.ranks[0].gpu, -1);
  EXPECT_FALSE(plan.notes.empty());
}

TEST(Plan, NicIsExactMatchAndUserMayOverride) {
  const auto plan = plan_for("dgx-h100", 8, BindMode::kCores);
  bool found = false;
  for (const auto& [k, v] : plan.rank_env(1)) {
    if (k == "NCCL_IB_HCA") {
      EXPECT_EQ(v, "=mlx5_1");
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(Plan, VirtualLocalRankSeesOneDevice) {
  PlanRequest r;
  r.nproc = 4;
  r.own_gpu_only = true;
  const auto plan = make_plan(topology::load_host_json(topo_json("mi250")), r);
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : plan.rank_env(2)) env[k] = v;
  EXPECT_EQ(env["ROCR_VISIBLE_DEVICES"], "2");
  EXPECT_EQ(env["HIP_VISIBLE_DEVICES"], "0");
  EXPECT_EQ(plan.ranks[2].device_index, 0);
}

TEST(Plan, CpuOnlyHostUsesGlooAndSplitsNodes) {
  auto host = topology::load_host_json(topo_json("t4x2"));
  host.gpus.clear();
  host.links.clear();
  PlanRequest r;
  r.nproc = 4;
  const auto plan = make_plan(host, r);
  EXPECT_EQ(plan.backend, Backend::kGloo);
  EXPECT_EQ(plan.ranks[0].numa_node, 0);
  EXPECT_EQ(plan.ranks[1].numa_node, 0);
  EXPECT_EQ(plan.ranks[2].numa_node, 1);
  EXPECT_EQ(plan.ranks[3].numa_node, 1);
  EXPECT_EQ(plan.ranks[0].cores, 8);
}

TEST(Plan, PhysicalCoresFollowSiblingNumbering) {
  topology::Host h;
  h.logical_cpus = 8;
  h.cores = 4;
  const auto cores = physical_cores(h, {0, 1, 4, 5});
  ASSERT_EQ(cores.size(), 2u);
  EXPECT_EQ(cores[0], (topology::IdSet{0, 4}));
  EXPECT_EQ(cores[1], (topology::IdSet{1, 5}));
  h.cores = 0;  // unknown: every CPU its own core
  EXPECT_EQ(physical_cores(h, {0, 1, 4, 5}).size(), 4u);
}

}  // namespace
}  // namespace gpuorch::launch

namespace gpuorch::launch {
namespace {

// Fewer ranks than GPUs: the ranks get the best-connected GPUs (the scheduler core's picker), not
// the first ones. On a DGX H100 every pair is NV18, so two ranks keep GPUs 0 and 1; cut the
// NVLinks between GPU 0 and every other GPU, and GPUs 1 and 2 win.
TEST(Plan, FewerRanksThanGpusGetTheBestConnectedGpus) {
  auto host = topology::load_host_json(launch_test::topo_json("dgx-h100"));
  PlanRequest r;
  r.nproc = 2;
  auto plan = make_plan(host, r);
  EXPECT_EQ(plan.ranks[0].gpu, 0);
  EXPECT_EQ(plan.ranks[1].gpu, 1);
  for (auto& l : host.links) {
    if (l.a == 0 && l.b < static_cast<int>(host.gpus.size())) {
      l.path = topology::Path::kSys;
      l.nvlinks = 0;
    }
  }
  plan = make_plan(host, r);
  EXPECT_EQ(plan.ranks[0].gpu, 1);
  EXPECT_EQ(plan.ranks[1].gpu, 2);
  EXPECT_EQ(plan.ranks[0].device_index, 0);
  EXPECT_EQ(plan.ranks[1].device_index, 1);
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : plan.rank_env(1)) env[k] = v;
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1,2");
}

// GH200 (and CXL memory) hosts list NUMA nodes without CPUs. A GPU whose node is one of them
// runs its rank on the nearest node with CPUs and binds memory there, not on the memory-only
// node (tests/fixtures/launch/gh200-nvl2.topo.json: two superchips, the GPUs' HBM as nodes 2
// and 3, the Grace CPUs as nodes 0 and 1).
topology::Host gh200() {
  return topology::load_host_json(launch_test::launch_fixture("gh200-nvl2.topo.json").string());
}

TEST(Plan, GpuOnAMemoryOnlyNodeRunsOnTheNearestNodeWithCpus) {
  PlanRequest r;
  r.nproc = 2;
  const auto plan = make_plan(gh200(), r);
  ASSERT_EQ(plan.ranks.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const auto& b = plan.ranks[static_cast<std::size_t>(i)];
    EXPECT_EQ(b.numa_node, i);
    EXPECT_TRUE(b.bind_memory);
    EXPECT_EQ(topology::format_id_list(b.cpus), i == 0 ? "0-71" : "72-143");
    EXPECT_EQ(b.cores, 72);
  }
  ASSERT_EQ(plan.notes.size(), 2u);
  EXPECT_EQ(plan.notes[0],
            "GPU 0: NUMA node 2 has no CPUs (memory only); its rank runs on, and binds memory to, "
            "node 0, the nearest with CPUs (distance 80)");
  const auto table = render_plan_table(plan);
  EXPECT_EQ(table, golden("gh200-nvl2.cores.txt", table));
}

TEST(Plan, TheDistanceMatrixDecidesThenLocalCpusThenTheFirstNode) {
  auto host = gh200();
  // Local CPUs that disagree with the distances: the distances win.
  host.gpus[0].local_cpus = *topology::parse_id_list("72-143");
  PlanRequest r;
  r.nproc = 1;
  EXPECT_EQ(make_plan(host, r).ranks[0].numa_node, 0);
  for (auto& n : host.numa_nodes) n.distances.clear();
  EXPECT_EQ(make_plan(host, r).ranks[0].numa_node, 1);
  host.gpus[0].local_cpus.clear();
  const auto plan = make_plan(host, r);
  EXPECT_EQ(plan.ranks[0].numa_node, 0);
  EXPECT_EQ(topology::format_id_list(plan.ranks[0].cpus), "0-71");
}

TEST(Plan, CpuRanksSkipMemoryOnlyNodes) {
  auto host = topology::load_host_json(topo_json("t4x2"));
  host.gpus.clear();
  host.links.clear();
  topology::NumaNode cxl;
  cxl.id = 2;
  cxl.memory_mib = 262144;
  host.numa_nodes.push_back(cxl);
  for (auto& n : host.numa_nodes) n.distances.clear();
  PlanRequest r;
  r.nproc = 3;
  const auto plan = make_plan(host, r);
  for (const auto& b : plan.ranks) {
    EXPECT_NE(b.numa_node, 2) << b.local_rank;
    EXPECT_FALSE(b.cpus.empty());
  }
}

}  // namespace
}  // namespace gpuorch::launch

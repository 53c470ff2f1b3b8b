// The one GPU link scale (topology/link_scores.hpp): more NVLinks beat fewer, any NVLink/xGMI
// beats any PCIe path, PIX > PXB > PHB > NODE > SYS, and the same NUMA node only breaks ties.
#include "gpuorch/topology/link_scores.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fixture_hosts.hpp"

namespace gpuorch::topology {
namespace {

// One rung of the scale: a GPU pair's connection; `path` kSelf stands for "no link known".
struct Rung {
  std::string name;
  Path path;
  int nvlinks = 0;
  int xgmi_weight = 0;
};

// Two GPUs joined by `r`, on one NUMA node or on two.
int score(const Rung& r, bool same_numa) {
  Host h;
  h.gpus.resize(2);
  h.gpus[0].numa_node = 0;
  h.gpus[1].numa_node = same_numa ? 0 : 1;
  if (r.path != Path::kSelf) {
    Link l;
    l.a = 0;
    l.b = 1;
    l.path = r.path;
    l.nvlinks = r.nvlinks;
    l.xgmi_weight = r.xgmi_weight;
    h.links.push_back(l);
  }
  return gpu_link_score(h, 0, 1);
}

// Each rung, across NUMA nodes, above the rung below it on one NUMA node.
void expect_ladder(const std::vector<Rung>& rungs) {
  for (std::size_t i = 0; i < rungs.size(); ++i) {
    SCOPED_TRACE(rungs[i].name);
    EXPECT_EQ(score(rungs[i], true), score(rungs[i], false) + 1);
    EXPECT_LE(score(rungs[i], true), kMaxGpuLinkScore);
    if (i > 0) {
      EXPECT_GT(score(rungs[i], false), score(rungs[i - 1], true)) << rungs[i - 1].name;
    }
  }
}

TEST(GpuLinkScores, PcieThenNvLinkByCount) {
  std::vector<Rung> rungs = {{"unknown", Path::kSelf}, {"SYS", Path::kSys}, {"NODE", Path::kNode},
                             {"PHB", Path::kPhb},      {"PXB", Path::kPxb}, {"PIX", Path::kPix}};
  for (int n = 1; n <= kMaxScoredNvLinks; ++n) {
    rungs.push_back({"NV" + std::to_string(n), Path::kNvLink, n});
  }
  expect_ladder(rungs);
  // Past the scale's top, more links score as NV64.
  EXPECT_EQ(score({"NV80", Path::kNvLink, 80}, true), kMaxGpuLinkScore);
}

TEST(GpuLinkScores, XgmiByKfdWeightAboveEveryPciePath) {
  // KFD weights grow with hops: 15 inside an MI250 package, 30 across; unknown counts as one
  // link.
  expect_ladder({{"PIX", Path::kPix},
                 {"XGMI weight unknown", Path::kXgmi, 0, 0},
                 {"XGMI weight 30", Path::kXgmi, 0, 30},
                 {"XGMI weight 15", Path::kXgmi, 0, 15}});
  EXPECT_EQ(score({"XGMI weight 90", Path::kXgmi, 0, 90}, false),
            score({"NV1", Path::kNvLink, 1}, false));
}

TEST(GpuLinkScores, UnknownNumaNodesGiveNoTieBreak) {
  Host h;
  h.gpus.resize(2);  // numa_node -1 on both, as in a VM
  h.links.push_back({0, 1, Path::kNvLink, Path::kPhb, 18, 0, 0});
  EXPECT_EQ(gpu_link_score(h, 0, 1), 2 * (50 + 18));
}

// The recorded hosts' matrices: symmetric, 0 on the diagonal, each entry the pair's score.
TEST(GpuLinkScores, RecordedHosts) {
  struct Want {
    const char* host;
    std::size_t a, b;
    int score;
  };
  for (const Want& w : {Want{"dgx-h100", 0, 1, 137},    // NV18, NUMA node 0
                        Want{"dgx-h100", 0, 4, 136},    // NV18 across NUMA nodes
                        Want{"mi250", 0, 1, 109},       // xGMI weight 15 (4 links), one node
                        Want{"mi250", 1, 2, 104},       // xGMI weight 30 (2 links), across
                        Want{"t4x2", 0, 1, 10},         // SYS
                        Want{"h200-vm", 0, 1, 136}}) {  // NV18, numa_node -1
    SCOPED_TRACE(w.host);
    const Host h = testing::discover_fixture(testing::topo_fixture(w.host)).host;
    const auto m = gpu_link_scores(h);
    const std::size_t n = h.gpus.size();
    ASSERT_EQ(m.size(), n * n);
    EXPECT_EQ(m[w.a * n + w.b], w.score);
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = 0; b < n; ++b) {
        EXPECT_EQ(m[a * n + b], m[b * n + a]);
        EXPECT_EQ(m[a * n + b], gpu_link_score(h, a, b));
      }
      EXPECT_EQ(m[a * n + a], 0);
    }
  }
}

}  // namespace
}  // namespace gpuorch::topology

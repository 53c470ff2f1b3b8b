// The embedded synthetic default follows openb's published composition (protocol §1, §2).
#include "gpuorch/sim/openb_like.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "gpuorch/workload/target_workload.hpp"

namespace gpuorch::sim {
namespace {

TEST(OpenbLikeNodes, MatchOpenbGpuNodeList) {
  const auto nodes = openb_like_nodes();
  ASSERT_EQ(nodes.size(), 1213U);
  std::map<std::string, int> gpus_by_model;
  std::map<int, int> nodes_by_gpus;
  std::int64_t cpu = 0;
  std::int64_t memory = 0;
  std::set<std::string> names;
  for (const auto& n : nodes) {
    gpus_by_model[n.gpu_model] += n.gpu_count;
    ++nodes_by_gpus[n.gpu_count];
    cpu += n.cpu_milli;
    memory += n.memory_mib;
    names.insert(n.name);
    EXPECT_EQ(n.name.rfind("synthetic-", 0), 0U) << n.name;
  }
  EXPECT_EQ(names.size(), nodes.size());
  EXPECT_EQ(gpus_by_model, (std::map<std::string, int>{{"A10", 2},
                                                       {"G2", 4392},
                                                       {"G3", 312},
                                                       {"P100", 265},
                                                       {"T4", 842},
                                                       {"V100M16", 195},
                                                       {"V100M32", 204}}));
  EXPECT_EQ(nodes_by_gpus, (std::map<int, int>{{1, 24}, {2, 518}, {4, 54}, {8, 617}}));
  EXPECT_EQ(cpu, 107018000);
  EXPECT_EQ(memory, 503828480);
}

TEST(OpenbLikePods, DeterministicValidAndOpenbShaped) {
  const auto pods = openb_like_pods(1);
  ASSERT_EQ(pods.size(), 8152U);
  EXPECT_EQ(openb_like_pods(7, 100).size(), 100U);
  const auto again = openb_like_pods(1);
  const auto other = openb_like_pods(2);
  bool same = true;
  bool differs = false;
  std::size_t cpu_only = 0;
  std::set<std::string> names;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    const auto& p = pods[i];
    same = same && p.cpu_milli == again[i].cpu_milli && p.gpu_milli == again[i].gpu_milli &&
           p.gpu_count == again[i].gpu_count;
    differs = differs || p.cpu_milli != other[i].cpu_milli || p.gpu_milli != other[i].gpu_milli;
    names.insert(p.name);
    EXPECT_GT(p.cpu_milli, 0);
    if (p.gpu_count == 0) {
      ++cpu_only;
      EXPECT_EQ(p.gpu_milli, 0);
    } else {
      EXPECT_GT(p.gpu_milli, 0);
      EXPECT_LE(p.gpu_milli, 1000);
      if (p.gpu_count > 1) {
        EXPECT_EQ(p.gpu_milli, 1000);
      }
    }
  }
  EXPECT_TRUE(same);
  EXPECT_TRUE(differs);
  EXPECT_EQ(names.size(), pods.size());
  // openb default: 1088 of 8152 pods are CPU-only (13.3 %).
  EXPECT_NEAR(100.0 * static_cast<double>(cpu_only) / 8152.0, 13.3, 1.5);
  // Its most popular shape is openb's: (3152 CPU, 810 milli, 1 GPU).
  const auto target = workload::typical_pods(pods);
  ASSERT_FALSE(target.classes.empty());
  EXPECT_EQ(target.classes[0].cpu_milli, 3152);
  EXPECT_EQ(target.classes[0].gpu_milli, 810);
}

}  // namespace
}  // namespace gpuorch::sim

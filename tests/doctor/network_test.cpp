// doctor network on recorded trees: each tree or env file raises exactly its findings.
#include <gtest/gtest.h>

#include "doctor/doctor_test_util.hpp"
#include "gpuorch/discover/tree.hpp"
#include "gpuorch/doctor/network.hpp"
#include "gpuorch/doctor/nccl_name_list.hpp"
#include "gpuorch/launch/worker_env.hpp"

namespace gpuorch {
namespace {

using test::doctor_fixture;
using test::find_id;
using test::problem_ids;
using Ids = std::vector<std::string>;

std::vector<doctor::Finding> check(const std::string& tree, const std::string& env_file = "") {
  discover::Diagnostics diag;
  const discover::Tree t(doctor_fixture("network/" + tree), &diag);
  auto state = doctor::read_network_state(t);
  EXPECT_EQ(diag.problems(), std::vector<std::string>{});
  if (!env_file.empty()) {
    for (const auto& [k, v] : launch::read_env_file(doctor_fixture("network/env/" + env_file))) {
      state.env[k] = v;
    }
    state.env_source = "env file " + env_file;
  }
  return doctor::check_network(state);
}

struct Case {
  const char* tree;
  const char* env;
  Ids problems;
};

class NetworkFixture : public ::testing::TestWithParam<Case> {};

TEST_P(NetworkFixture, RaisesExactlyItsFindings) {
  EXPECT_EQ(problem_ids(check(GetParam().tree, GetParam().env)), GetParam().problems)
      << GetParam().tree << " " << GetParam().env;
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, NetworkFixture,
    ::testing::Values(Case{"healthy", "", {}}, Case{"healthy", "good.env", {}},
                      Case{"port-down", "", {"net.port-down"}},
                      Case{"port-init", "", {"net.port-down"}},
                      Case{"port-rate", "", {"net.port-rate"}},
                      Case{"no-peermem", "", {"net.peermem-missing"}},
                      Case{"memlock-capped", "", {"net.memlock"}},
                      Case{"healthy", "bad-ifname.env", {"net.socket-ifname"}},
                      Case{"healthy", "down-ifname.env", {"net.socket-ifname"}},
                      Case{"healthy", "bad-hca.env", {"net.ib-hca"}},
                      Case{"healthy", "bad-hca-port.env", {"net.ib-hca"}},
                      Case{"healthy", "ib-disabled.env", {"net.ib-disabled"}}));

TEST(Network, ReadsPortsAsIbvDevinfoShowsThem) {
  const auto findings = check("healthy", "good.env");
  const auto rdma = find_id(findings, "net.rdma");
  ASSERT_TRUE(rdma);
  EXPECT_EQ(rdma->evidence,
            "mlx5_0 port 1: ACTIVE LinkUp 400 Gb/s InfiniBand; mlx5_1 port 1: ACTIVE LinkUp 400 "
            "Gb/s InfiniBand");
  ASSERT_TRUE(find_id(findings, "net.peermem"));
  const auto env = find_id(findings, "net.nccl-env");
  ASSERT_TRUE(env);
  EXPECT_EQ(env->evidence, "NCCL_IB_HCA=mlx5_0:1,mlx5_1:1 NCCL_SOCKET_IFNAME=ens1f0");
}

TEST(Network, FindingsCarryTheirEvidence) {
  const auto down = find_id(check("port-down"), "net.port-down");
  ASSERT_TRUE(down);
  EXPECT_EQ(down->what, "mlx5_1 port 1 is DOWN, so NCCL cannot use it");
  const auto init = find_id(check("port-init"), "net.port-down");
  ASSERT_TRUE(init);
  EXPECT_NE(init->fix.find("subnet manager"), std::string::npos);
  const auto memlock = find_id(check("memlock-capped"), "net.memlock");
  EXPECT_NE(memlock->evidence.find("8388608 bytes"), std::string::npos);
  const auto port = find_id(check("healthy", "bad-hca-port.env"), "net.ib-hca");
  EXPECT_EQ(port->what, "NCCL_IB_HCA names mlx5_0 port 2, which does not exist");
  const auto ifname = find_id(check("healthy", "bad-ifname.env"), "net.socket-ifname");
  EXPECT_NE(ifname->evidence.find("interfaces: docker0, ens1f0, ibp23s0, lo"), std::string::npos)
      << ifname->evidence;
}

TEST(NcclNameList, PrefixExactExcludeAndPorts) {
  const std::vector<std::string> devs{"mlx5_0", "mlx5_1", "mlx5_10"};
  EXPECT_EQ(doctor::selected(*doctor::parse_name_list("mlx5_1", true), devs),
            (std::vector<std::string>{"mlx5_1", "mlx5_10"}));
  EXPECT_EQ(doctor::selected(*doctor::parse_name_list("=mlx5_1", true), devs),
            (std::vector<std::string>{"mlx5_1"}));
  EXPECT_EQ(doctor::selected(*doctor::parse_name_list("^=mlx5_1:1", true), devs),
            (std::vector<std::string>{"mlx5_0", "mlx5_10"}));
  EXPECT_FALSE(doctor::parse_name_list("mlx5_0:x", true));
}

}  // namespace
}  // namespace gpuorch

// The demonstration: a real PyTorch DDP script (Debian's python3-torch, Gloo on CPU)
// under gpuorch launch, two "nodes" of two workers on this machine meeting through a loopback
// etcd: the loss falls and all ranks end with identical weights; a worker killed mid-run makes
// the group restart and the run complete; with --nnodes 1:2 a second node joining later triggers
// a new round. Skipped (with a message) where python3-torch or etcd is absent.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../launch/launch_support.hpp"
#include "../support/test_support.hpp"
#include "support/paths.hpp"

namespace gpuorch {
namespace {

namespace fs = std::filesystem;
using launch_test::Child;
using launch_test::read_file;

class LaunchDdp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!launch_test::have_torch()) {
      GTEST_SKIP() << "python3-torch is not installed (/usr/bin/python3 cannot import torch)";
    }
    if (!launch_test::have_etcd()) GTEST_SKIP() << "etcd is not installed (Debian: etcd-server)";
    etcd_.emplace(dir_.path() / "etcd");
    ASSERT_TRUE(etcd_->ready()) << read_file(dir_.path() / "etcd" / "etcd.err");
  }

  // One node's agent; `extra` goes before `--`, `train` after the script.
  std::unique_ptr<Child> node(const std::string& name, const std::string& nnodes,
                              const std::string& run_id, const std::string& extra,
                              const std::string& train) {
    const std::string cmd =
        test::shell_quote(::gpuorch::test::binary_path()) + " launch --nnodes " + nnodes +
        " --nproc-per-node 2 --rdzv-backend etcd --rdzv-endpoint " + etcd_->endpoint() +
        " --rdzv-id " + run_id +
        " --rdzv-conf last_call_timeout=1,join_timeout=60 --summary-json " +
        dir_.file(name + ".summary.json") + " --stop-grace 3 " + extra + " -- /usr/bin/python3 " +
        test::shell_quote(launch_test::launch_fixture("ddp_train.py").string()) + " --ckpt-dir " +
        dir_.file("ckpt") + " --out " + dir_.file("result.json") + " " + train;
    fs::create_directories(dir_.path() / "ckpt");
    return std::make_unique<Child>(cmd, dir_.path() / (name + ".out"),
                                   dir_.path() / (name + ".err"));
  }

  std::string log(const std::string& name) {
    return read_file(dir_.path() / (name + ".out")) + read_file(dir_.path() / (name + ".err"));
  }
  nlohmann::json json(const std::string& file) {
    return nlohmann::json::parse(read_file(dir_.path() / file));
  }
  void expect_success(Child& c, const std::string& name) {
    const auto code = c.wait(std::chrono::seconds(120));
    ASSERT_TRUE(code) << name << " still running:\n" << log(name);
    EXPECT_EQ(*code, 0) << log(name);
  }
  void expect_trained(int world_size) {
    const auto r = json("result.json");
    EXPECT_EQ(r["world_size"], world_size);
    EXPECT_TRUE(r["identical"].get<bool>());
    EXPECT_LT(r["last_loss"].get<double>(), r["first_loss"].get<double>());
  }

  test::TempDir dir_;
  std::optional<launch_test::LoopbackEtcd> etcd_;
};

TEST_F(LaunchDdp, TwoNodesOfTwoWorkersThroughEtcd) {
  auto a = node("a", "2", "ddp-two", "", "--steps 12");
  auto b = node("b", "2", "ddp-two", "", "--steps 12");
  expect_success(*a, "a");
  expect_success(*b, "b");
  expect_trained(4);
  const auto sa = json("a.summary.json");
  const auto sb = json("b.summary.json");
  EXPECT_EQ(sa["world_size"], 4);
  EXPECT_EQ(sa["group_rank"].get<int>() + sb["group_rank"].get<int>(), 1);
  EXPECT_EQ(sa["restarts"], 0);
}

TEST_F(LaunchDdp, KilledWorkerRestartsTheGroupAndTheRunCompletes) {
  // Global rank 3 (node 1, local rank 1) SIGKILLs itself at step 5, once.
  const std::string train = "--steps 12 --ckpt-every 2 --kill-rank 3 --kill-at-step 5";
  auto a = node("a", "2", "ddp-kill", "--max-restarts 2", train);
  auto b = node("b", "2", "ddp-kill", "--max-restarts 2", train);
  expect_success(*a, "a");
  expect_success(*b, "b");
  expect_trained(4);
  EXPECT_GT(json("result.json")["resumed_from_step"].get<int>(), 0);
  const auto sa = json("a.summary.json");
  const auto sb = json("b.summary.json");
  const auto& killed = sa["group_rank"] == 1 ? sa : sb;
  EXPECT_GE(killed["attempts"].get<int>(), 2);
  ASSERT_FALSE(killed["first_failure"].is_null()) << log("a") << log("b");
  EXPECT_EQ(killed["first_failure"]["rank"], 3);
  EXPECT_EQ(killed["first_failure"]["exit_code"], -9);
  EXPECT_EQ(killed["restarts"], 1);
}

TEST_F(LaunchDdp, SecondNodeJoiningLaterTriggersANewRound) {
  const std::string train = "--steps 24 --ckpt-every 2 --step-sleep 0.25";
  auto a = node("a", "1:2", "ddp-join", "", train);
  // Node b arrives once node a trains alone.
  for (int i = 0; i < 600 && log("a").find("[rank0]:step 3 ") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(log("a").find("[rank0]:step 3 "), std::string::npos) << log("a");
  EXPECT_NE(log("a").find("start: world 2"), std::string::npos);
  auto b = node("b", "1:2", "ddp-join", "", train);
  expect_success(*a, "a");
  expect_success(*b, "b");
  expect_trained(4);
  EXPECT_GT(json("result.json")["resumed_from_step"].get<int>(), 0);
  const auto sa = json("a.summary.json");
  EXPECT_GE(sa["membership_changes"].get<int>(), 1) << log("a");
  EXPECT_EQ(sa["restarts"], 0);    // membership changes do not use restarts
  EXPECT_EQ(sa["group_rank"], 0);  // the node of the first round keeps rank 0
  EXPECT_NE(log("a").find("start: world 4"), std::string::npos) << log("a");
}

}  // namespace
}  // namespace gpuorch

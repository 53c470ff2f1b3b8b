// gpuorch doctor as a user runs it: exit 0 when all is well, 1 with a problem, 2 on bad usage;
// one line per finding, or JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using test::run_cli;

std::string nccl(const std::string& name) { return test::fixture("doctor/nccl/" + name); }

TEST(DoctorCli, NcclLogExitCodesFollowTheFindings) {
  test::TempDir dir;
  const auto ok = run_cli({"doctor", "nccl-log", nccl("healthy-ib.log")}, dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("info    nccl.summary: NCCL 2.18.5+cuda12.2: 4 ranks on 2 host(s)"),
            std::string::npos)
      << ok.out;
  EXPECT_NE(ok.out.find(": no problem found\n"), std::string::npos);

  const auto bad = run_cli({"doctor", "nccl-log", nccl("socket-fallback.log")}, dir);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("warning nccl.socket-fallback: traffic between hosts goes over TCP"),
            std::string::npos)
      << bad.out;
  EXPECT_NE(bad.out.find("1 problem found"), std::string::npos);
}

TEST(DoctorCli, NcclLogJson) {
  test::TempDir dir;
  const auto r = run_cli({"doctor", "nccl-log", "--json", nccl("timeout-rank-stopped.log")}, dir);
  EXPECT_EQ(r.exit_code, 1);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema"], "gpuorch.doctor/v1");
  EXPECT_EQ(j["problem"], true);
  ASSERT_EQ(j["checks"].size(), 1u);
  const auto& findings = j["checks"][0]["findings"];
  bool timeout = false;
  for (const auto& f : findings) {
    if (f["id"] == "nccl.timeout") {
      timeout = true;
      EXPECT_EQ(f["severity"], "error");
      EXPECT_FALSE(f["fix"].get<std::string>().empty());
    }
  }
  EXPECT_TRUE(timeout) << r.out;
}

// Issue 35: the duplicate-GPU log gets the binding advice; the catalogue is listed; a calibration
// file that is not one is bad input (one line, exit 2).
TEST(DoctorCli, NcclLogCatalogueAndCalibration) {
  test::TempDir dir;
  const auto dup = run_cli({"doctor", "nccl-log", nccl("duplicate-gpu.log")}, dir);
  EXPECT_EQ(dup.exit_code, 1);
  EXPECT_NE(dup.out.find("error   nccl.duplicate-gpu: ranks 0 and 1 use the same GPU"),
            std::string::npos)
      << dup.out;
  EXPECT_NE(dup.out.find("gpuorch launch"), std::string::npos);
  const auto cat = run_cli({"doctor", "nccl-catalogue"}, dir);
  EXPECT_EQ(cat.exit_code, 0) << cat.err;
  EXPECT_NE(cat.out.find("nccl net-ib"), std::string::npos) << cat.out;
  EXPECT_NE(cat.out.find("\nall "), std::string::npos) << cat.out;
  const auto json = run_cli({"doctor", "nccl-catalogue", "--json"}, dir);
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_GT(nlohmann::json::parse(json.out).size(), 1000U);
  const std::string not_calibration = dir.file("calib.json");
  test::write_text(not_calibration, "{\"schema\": \"something/else\"}\n");
  const auto bad = run_cli(
      {"doctor", "nccl-log", nccl("shm-not-p2p.log"), "--calibration", not_calibration}, dir);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "gpuorch: " + not_calibration +
                         ": not a calibration file (schema gpuorch.calibration/1, `gpuorch tune "
                         "nccl --calibration`)\n");
}

TEST(DoctorCli, BadUsageIsExitTwo) {
  test::TempDir dir;
  const auto missing = run_cli({"doctor", "nccl-log", "/nonexistent/job.log"}, dir);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err,
            "gpuorch: /nonexistent/job.log: the NCCL log cannot be opened: No such file or "
            "directory\n");
  EXPECT_EQ(missing.out, "");
  const std::string not_nccl = dir.file("plain.log");
  test::write_text(not_nccl, "epoch 1 loss 0.3\n");
  const auto plain = run_cli({"doctor", "nccl-log", not_nccl}, dir);
  EXPECT_EQ(plain.exit_code, 2);
  EXPECT_NE(plain.err.find("no NCCL line in 1 lines"), std::string::npos) << plain.err;
  EXPECT_EQ(run_cli({"doctor", "no-such-check"}, dir).exit_code, 2);
  EXPECT_EQ(run_cli({"doctor", "nccl-log"}, dir).exit_code, 2);
  const auto help = run_cli({"doctor", "nccl-log", "--help"}, dir);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Examples:\n  NCCL_DEBUG=INFO torchrun"), std::string::npos) << help.out;
}

TEST(DoctorCli, NetworkOnARecordedTree) {
  test::TempDir dir;
  const std::string net = test::fixture("doctor/network/");
  const auto ok = run_cli({"doctor", "network", "--no-process-env", "--sysfs-root", net + "healthy",
                           "--env-file", net + "env/good.env"},
                          dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_EQ(ok.err, "");
  const auto bad = run_cli(
      {"doctor", "network", "--no-process-env", "--sysfs-root", net + "no-peermem", "--json"}, dir);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("\"net.peermem-missing\""), std::string::npos) << bad.out;
  const auto missing = run_cli({"doctor", "network", "--sysfs-root", "/nonexistent/tree"}, dir);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "gpuorch: /nonexistent/tree: not a directory\n");
  const std::string env = dir.file("bad.env");
  test::write_text(env, "NCCL_IB_HCA=mlx5_0\nthis is not a variable\n");
  const auto bad_env =
      run_cli({"doctor", "network", "--sysfs-root", net + "healthy", "--env-file", env}, dir);
  EXPECT_EQ(bad_env.exit_code, 2);
  EXPECT_NE(bad_env.err.find("bad.env:2:"), std::string::npos) << bad_env.err;
}

TEST(DoctorCli, NumaOnARecordedProcTree) {
  test::TempDir dir;
  const std::string numa = test::fixture("doctor/numa/");
  const std::string topo = test::fixture("topo/dgx-h100/expected/topo.json");
  const auto ok = run_cli({"doctor", "numa", "--sysfs-root", numa + "bound", "--topology", topo,
                           "--kubelet-config", numa + "kubelet/aligned.yaml"},
                          dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("info    numa.process: pid 4242 (python3) uses GPU0 (NUMA node 0"),
            std::string::npos)
      << ok.out;
  const auto bad =
      run_cli({"doctor", "numa", "--sysfs-root", numa + "unbound", "--topology", topo}, dir);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("warning numa.cpu-affinity: pid 4242 (python3)"), std::string::npos)
      << bad.out;
  const auto kubelet =
      run_cli({"doctor", "numa", "--kubelet-config", numa + "kubelet/not-kubelet.yaml"}, dir);
  EXPECT_EQ(kubelet.exit_code, 2);
  EXPECT_NE(kubelet.err.find("not-kubelet.yaml:1: not a KubeletConfiguration"), std::string::npos)
      << kubelet.err;
}

// Bare `gpuorch doctor` runs the host checks (network, numa) on the host or a recording.
TEST(DoctorCli, BareDoctorRunsTheHostChecks) {
  test::TempDir dir;
  const auto r = run_cli(
      {"doctor", "--json", "--sysfs-root", test::fixture("doctor/network/memlock-capped")}, dir);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["checks"].size(), 2u);
  EXPECT_EQ(j["checks"][0]["check"], "network");
  EXPECT_EQ(j["checks"][0]["problem"], true);
  EXPECT_EQ(j["checks"][1]["check"], "numa");
}

}  // namespace
}  // namespace gpuorch

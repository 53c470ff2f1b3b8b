// gpuorch dra-driver as a user runs it: the dry run's ResourceSlice, one-line errors with exit
// code 2, and the program against the real API server: it publishes its slice (and publishes it
// again when it is deleted), serves its sockets, and on SIGTERM removes them and exits 0.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <thread>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "k8s/k8s_support.hpp"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "support/control_plane.hpp"
#include "support/scheduler_process.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

using test::run_cli;
using test::TempDir;

TEST(DraDriverCli, DryRunPrintsTheResourceSlice) {
  TempDir dir;
  const auto r = run_cli({"dra-driver", "--topology", test::topo_json_path("dgx-h100"),
                          "--node-name", "dgx-h100-01", "--dry-run"},
                         dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["metadata"]["name"], "dgx-h100-01-gpu.gpuorch.io");
  EXPECT_EQ(j["spec"]["devices"].size(), 10U);  // GPU 7 as its 3 MIG instances
  EXPECT_EQ(j["spec"]["devices"][7]["attributes"]["resource.kubernetes.io/pciBusID"]["string"],
            "0000:df:00.0");
}

TEST(DraDriverCli, BadInputIsOneLineExitTwo) {
  TempDir dir;
  const auto bad_node = run_cli({"dra-driver", "--topology", test::topo_json_path("t4x2"),
                                 "--node-name", "Bad_Node", "--dry-run"},
                                dir);
  EXPECT_EQ(bad_node.exit_code, 2);
  EXPECT_EQ(test::lines_of(bad_node.err).size(), 1U) << bad_node.err;
  EXPECT_NE(bad_node.err.find("'Bad_Node' is not a DNS-1123 subdomain"), std::string::npos);
  test::write_text(dir.file("topo.json"), "{\n  \"schema\": 3\n");
  const auto bad_topo =
      run_cli({"dra-driver", "--topology", dir.file("topo.json"), "--dry-run"}, dir);
  EXPECT_EQ(bad_topo.exit_code, 2);
  EXPECT_EQ(test::lines_of(bad_topo.err).size(), 1U) << bad_topo.err;
  EXPECT_NE(bad_topo.err.find(dir.file("topo.json")), std::string::npos) << bad_topo.err;
}

// Polls `ready` every 100 ms for up to 30 s.
bool eventually(const std::function<bool()>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

TEST(DraDriverCli, PublishesServesAndStopsOnSigterm) {
  auto& plane = test::ControlPlane::shared();
  k8s::ApiClient api(k8s::load_cluster_config(plane.kubeconfig()));
  const std::string slice = "/apis/resource.k8s.io/v1/resourceslices/cli-node-gpu.gpuorch.io";
  const auto exists = [&] {
    try {
      api.get(slice);
      return true;
    } catch (const k8s::ApiError&) {
      return false;
    }
  };
  if (exists()) api.remove(slice);
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "registry");
  const std::string registration = dir.file("registry/gpu.gpuorch.io-reg.sock");
  const std::string dra = dir.file("plugin/dra.sock");
  test::SchedulerProcess driver(
      {"--topology", test::topo_json_path("t4x2"), "--node-name", "cli-node", "--kubeconfig",
       plane.kubeconfig(), "--plugins-registry", dir.file("registry"), "--plugin-dir",
       dir.file("plugin"), "--cdi-dir", dir.file("cdi"), "--resync-s", "1"},
      dir.file("driver.log"), "dra-driver");
  ASSERT_TRUE(eventually(exists)) << driver.log();
  EXPECT_EQ(api.get(slice)["spec"]["devices"].size(), 2U);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(registration); })) << driver.log();
  EXPECT_TRUE(std::filesystem::exists(dra));
  // Deleted by hand (or by a kubelet while the driver was away): back within a resync.
  api.remove(slice);
  EXPECT_TRUE(eventually(exists)) << driver.log();

  auto stub = pluginregistration::Registration::NewStub(
      grpc::CreateChannel("unix:" + registration, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pluginregistration::PluginInfo info;
  ASSERT_TRUE(stub->GetInfo(&ctx, {}, &info).ok());
  EXPECT_EQ(info.endpoint(), dra);

  EXPECT_EQ(driver.stop(), 0) << driver.log();
  EXPECT_FALSE(std::filesystem::exists(registration));
  EXPECT_FALSE(std::filesystem::exists(dra));
  EXPECT_NE(driver.log().find("ResourceSlice cli-node-gpu.gpuorch.io created"), std::string::npos)
      << driver.log();
  api.remove(slice);
}

}  // namespace
}  // namespace gpuorch

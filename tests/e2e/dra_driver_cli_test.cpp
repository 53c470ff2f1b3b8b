// gpuorch dra-driver as a user runs it: the dry run's ResourceSlice, one-line errors with exit
// code 2.
#include <gtest/gtest.h>

#include "k8s/k8s_support.hpp"
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

}  // namespace
}  // namespace gpuorch

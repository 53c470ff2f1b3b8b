// Same core, same answer: scripts/k8s-replay creates the openb nodes and pods on the real
// kube-apiserver, pod by pod in `sim arrivals` order, and every decision of `gpuorch scheduler`
// must equal `gpuorch sim fill --tie-break names --placements` for the seed and policy.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/paths.hpp"
#include "support/test_support.hpp"

namespace gpuorch {
namespace {

nlohmann::json replay(const std::string& nodes, const std::string& pods, const std::string& policy,
                      int limit, std::string* output) {
  const auto script =
      std::filesystem::path(::gpuorch::test::source_dir()) / "scripts" / "k8s-replay";
  const test::TempDir dir;
  const std::string out = dir.file("out");
  const std::string json = dir.file("summary.json");
  std::string command = fmt::format(
      "/usr/bin/python3 {} --gpuorch {} --nodes {} --pods {} --policy {} --seed 42 --tune 1.0 "
      "--json {}",
      test::shell_quote(script.string()), test::shell_quote(::gpuorch::test::binary_path()),
      test::shell_quote(nodes), test::shell_quote(pods), policy, test::shell_quote(json));
  if (limit > 0) command += fmt::format(" --limit {}", limit);
  command += fmt::format(" >{} 2>&1", test::shell_quote(out));
  const int status = std::system(command.c_str());
  *output = test::read_text(out);
  EXPECT_EQ(status, 0) << *output;
  if (!std::filesystem::exists(json)) return {};
  return nlohmann::json::parse(test::read_text(json));
}

TEST(K8sReplayScript, FixtureTracePodByPod) {
  std::string out;
  const auto s =
      replay(test::fixture("openb_nodes.csv"), test::fixture("openb_pods.csv"), "efd", 0, &out);
  ASSERT_TRUE(s.is_object()) << out;
  EXPECT_GT(s.value("pods", 0), 0) << out;
  EXPECT_EQ(s.value("mismatches", -1), 0) << out;
}

// The criterion: the 1213 openb nodes and the default trace's seed-42 arrivals up to
// x = 100, every pod where the simulator puts it (the sanitizer build replays the first 1500).
TEST(K8sReplayScript, OpenbDefaultTraceEfdAndFgd) {
  const auto openb = test::openb_dir();
  if (!openb) GTEST_SKIP() << "../shared/openb is absent";
  for (const char* policy : {"efd", "fgd"}) {
    std::string out;
    const auto s = replay((*openb / "openb_node_list_gpu_node.csv").string(),
                          (*openb / "openb_pod_list_default.csv").string(), policy,
                          test::kSanitized ? 1500 : 0, &out);
    ASSERT_TRUE(s.is_object()) << out;
    EXPECT_EQ(s.value("nodes", 0), 1213);
    EXPECT_GE(s.value("pods", 0), test::kSanitized ? 1500 : 8000) << out;
    EXPECT_EQ(s.value("mismatches", -1), 0) << policy << ": " << out;
  }
}

}  // namespace
}  // namespace gpuorch

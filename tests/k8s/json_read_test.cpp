// `--topology FILE` reads the JSON of `gpuorch topo --json` back into the same Host: writing it
// again gives the same bytes for every recorded fixture host.
#include <gtest/gtest.h>

#include "gpuorch/topology/json.hpp"
#include "k8s/k8s_support.hpp"
#include "support/test_support.hpp"

namespace gpuorch::topology {
namespace {

class JsonRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(JsonRoundTrip, SameBytesAgain) {
  const std::string path = test::topo_json_path(GetParam());
  const Host h = load_host_json(path);
  EXPECT_EQ(to_json_text(to_json(h)) + "\n", test::read_text(path));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, JsonRoundTrip,
                         ::testing::Values("dgx-h100", "mi250", "t4x2", "h200-vm"),
                         [](const auto& p) {
                           std::string n = p.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(JsonRead, BadFilesAreOneLine) {
  test::TempDir dir;
  const auto err = [&](const std::string& text) {
    test::write_text(dir.file("t.json"), text);
    return test::input_error([&] { load_host_json(dir.file("t.json")); });
  };
  const std::string f = dir.file("t.json");
  EXPECT_EQ(err("{\n\"schema\": [\n"), f + ":3: not valid JSON");
  EXPECT_EQ(err("{\"schema\": \"other/v9\"}"),
            f + ": schema: \"other/v9\" is not gpuorch.topology/v1 (the output of `gpuorch topo "
                "--json`)");
  EXPECT_EQ(err("{\"schema\": \"gpuorch.topology/v1\", \"hostname\": \"h\", \"gpus\": "
                "[{\"vendor\": \"intel\"}]}"),
            f + ": gpus[0]: unknown vendor \"intel\" (nvidia or amd)");
  EXPECT_EQ(test::input_error([&] { load_host_json(dir.file("missing.json")); }),
            dir.file("missing.json") + ": cannot read the topology file");
}

}  // namespace
}  // namespace gpuorch::topology

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
  // Numbers out of range, and what the rest relies on (NUMA nodes that exist, unique GPUs).
  const std::string head = "{\"schema\": \"gpuorch.topology/v1\", \"hostname\": \"h\", ";
  const std::string gpu =
      "{\"vendor\": \"nvidia\", \"pci\": null, \"model\": \"m\", "
      "\"uuid\": null";
  const std::string two_gpus = "\"gpus\": [" + gpu + "}, " + gpu + "}]";
  EXPECT_EQ(err(head + two_gpus +
                ", \"links\": [{\"a\": \"GPU0\", \"b\": \"GPU1\", "
                "\"path\": \"NV99999999999\", \"pcie_path\": \"PIX\"}]}"),
            f + ": links[0]: path \"NV99999999999\": an NVLink count is 1 to 64");
  EXPECT_EQ(err(head + "\n\"memory_mib\": 1e400, " + two_gpus + "}"),
            f + ":2: number 1e400 is out of range");
  EXPECT_EQ(err(head + "\"memory_mib\": 18446744073709551615, " + two_gpus + "}"),
            f + ": top level: \"memory_mib\" is out of range");
  EXPECT_EQ(err(head + "\"gpus\": [" + gpu + ", \"numa_node\": 4294967296}]}"),
            f + ": gpus[0]: \"numa_node\" 4294967296 is out of range");
  // Found by fuzz_topology_json: a version's digits were read with atoi and multiplied (overflow).
  EXPECT_EQ(err(head + "\"cuda_driver_version\": \"18888888882.2\", " + two_gpus + "}"),
            f + ": top level: \"cuda_driver_version\" is \"18888888882.2\", not MAJOR.MINOR "
                "(e.g. \"12.4\")");
  EXPECT_EQ(err(head + "\"gpus\": [" + gpu + ", \"compute_capability\": \"9.x\"}]}"),
            f + ": gpus[0]: \"compute_capability\" is \"9.x\", not MAJOR.MINOR (e.g. \"12.4\")");
  test::write_text(f, head + "\"cuda_driver_version\": \"12.4\", \"gpus\": [" + gpu +
                          ", \"compute_capability\": \"9.0\"}]}");
  EXPECT_EQ(load_host_json(f).cuda_driver_version, 12040);
  EXPECT_EQ(load_host_json(f).gpus.at(0).cc_major, 9);
  const std::string numa = "\"numa_nodes\": [{\"id\": 0}, {\"id\": 1}], ";
  EXPECT_EQ(err(head + numa + "\"gpus\": [" + gpu + ", \"numa_node\": 1000000}]}"),
            f + ": gpus[0]: \"numa_node\": 1000000 is not in \"numa_nodes\" (ids 0, 1), nor -1");
  EXPECT_EQ(err(head + "\"gpus\": [" + gpu + ", \"numa_node\": 0}]}"),
            f + ": gpus[0]: \"numa_node\": 0 is not in \"numa_nodes\" (ids none), nor -1");
  EXPECT_EQ(err(head + numa +
                "\"gpus\": [], \"nics\": [{\"name\": \"mlx5_0\", \"pci\": null, "
                "\"numa_node\": 7}]}"),
            f + ": nics[0]: \"numa_node\": 7 is not in \"numa_nodes\" (ids 0, 1), nor -1");
  EXPECT_EQ(err(head + "\"numa_nodes\": [{\"id\": 0}, {\"id\": 0}], \"gpus\": []}"),
            f + ": numa_nodes[1]: NUMA node 0 is listed twice");
  EXPECT_EQ(err(head + "\"gpus\": [" + gpu + ", \"index\": 1}, " + gpu + ", \"index\": 1}]}"),
            f + ": gpus[1]: GPU index 1 is used twice");
  test::write_text(f, head + numa + "\"gpus\": [" + gpu + ", \"numa_node\": 1}, " + gpu +
                          ", \"numa_node\": null}]}");
  EXPECT_EQ(load_host_json(f).gpus.at(1).numa_node, -1);
  EXPECT_EQ(
      test::input_error([&] { load_host_json(dir.file("missing.json")); }),
      dir.file("missing.json") + ": the topology file cannot be opened: No such file or directory");
}

}  // namespace
}  // namespace gpuorch::topology

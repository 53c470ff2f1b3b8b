#include "gpuorch/topology/path.hpp"

#include <gtest/gtest.h>

#include "gpuorch/topology/cpuset.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::topology {
namespace {

PciLocation at(std::string host_bridge, std::vector<std::string> bridges) {
  PciLocation l;
  l.host_bridge = std::move(host_bridge);
  l.bridges = std::move(bridges);
  l.known = true;
  return l;
}

TEST(PciePath, Classifies) {
  const auto gpu = at("pci0000:15", {"0000:15:01.0", "0000:16:00.0", "0000:17:01.0"});
  const auto nic = at("pci0000:15", {"0000:15:01.0", "0000:16:00.0", "0000:17:00.0"});
  EXPECT_EQ(pcie_path(gpu, 0, nic, 0), Path::kPix);
  const auto deep = at("pci0000:15", {"0000:15:01.0", "0000:16:00.0", "0000:17:02.0",
                                      "0000:20:00.0", "0000:21:00.0"});
  EXPECT_EQ(pcie_path(gpu, 0, deep, 0), Path::kPxb);
  const auto other_port = at("pci0000:15", {"0000:15:02.0"});
  EXPECT_EQ(pcie_path(gpu, 0, other_port, 0), Path::kPhb);
  const auto other_root = at("pci0000:3f", {"0000:3f:01.0"});
  EXPECT_EQ(pcie_path(gpu, 0, other_root, 0), Path::kNode);
  EXPECT_EQ(pcie_path(gpu, 0, other_root, 1), Path::kSys);
  PciLocation unknown;
  EXPECT_EQ(pcie_path(gpu, 0, unknown, 0), Path::kNode);
  EXPECT_EQ(pcie_path(gpu, -1, unknown, -1), Path::kSys);
  // Two functions of one dual-port NIC under the same port.
  EXPECT_EQ(pcie_path(nic, 0, nic, 0), Path::kPix);
}

TEST(IdSets, ParseAndFormat) {
  EXPECT_EQ(format_id_list(*parse_id_list("0-3,8,10-11\n")), "0-3,8,10-11");
  EXPECT_EQ(*parse_id_list(""), IdSet{});
  EXPECT_FALSE(parse_id_list("3-1"));
  EXPECT_FALSE(parse_id_list("a"));
  EXPECT_FALSE(parse_id_list("0-99999999"));
  EXPECT_EQ(format_id_list(*parse_id_mask("00000000,0000000f")), "0-3");
  EXPECT_EQ(format_id_list(*parse_id_mask("ff,00000000")), "32-39");
  EXPECT_FALSE(parse_id_mask("xyz"));
}

TEST(PathNames, NvidiaSmiVocabulary) {
  EXPECT_EQ(to_string(Path::kNvLink, 18), "NV18");
  EXPECT_EQ(to_string(Path::kSelf), "X");
  EXPECT_EQ(to_string(Path::kXgmi), "XGMI");
}

}  // namespace
}  // namespace gpuorch::topology

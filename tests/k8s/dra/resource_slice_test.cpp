// The ResourceSlice gpuorch dra-driver publishes, built from the recorded hosts.
#include "gpuorch/k8s/dra/resource_slice.hpp"

#include <gtest/gtest.h>

#include "k8s/k8s_support.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s::dra {
namespace {

using nlohmann::json;

json slice_of(const std::string& host, const std::string& node = "node-1") {
  SliceOptions o;
  o.node_name = node;
  return resource_slice(test::fixture_host(host), o);
}

TEST(DraResourceSlice, DgxH100HasOneDevicePerGpuWithItsTopology) {
  const json s = slice_of("dgx-h100", "dgx-h100-01");
  EXPECT_EQ(s["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(s["kind"], "ResourceSlice");
  EXPECT_EQ(s["metadata"]["name"], "dgx-h100-01-gpu.gpuorch.io");
  const json& spec = s["spec"];
  EXPECT_EQ(spec["driver"], "gpu.gpuorch.io");
  EXPECT_EQ(spec["nodeName"], "dgx-h100-01");
  EXPECT_EQ(spec["pool"],
            (json{{"name", "dgx-h100-01"}, {"generation", 1}, {"resourceSliceCount", 1}}));
  // The recording's GPU 7 is in MIG mode (3g.40gb, 2g.20gb, 1g.10gb): its three instances are
  // published in its place.
  ASSERT_EQ(spec["devices"].size(), 10U);
  const json& d0 = spec["devices"][0];
  EXPECT_EQ(d0["name"], "gpu-0");
  const json& a = d0["attributes"];
  EXPECT_EQ(a["productName"]["string"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(a["uuid"]["string"], "GPU-64bbca15-1776-feaf-35c7-c0761cd05691");
  EXPECT_EQ(a["index"]["int"], 0);
  EXPECT_EQ(a["type"]["string"], "gpu");
  EXPECT_EQ(a["cudaComputeCapability"]["version"], "9.0.0");
  EXPECT_EQ(a["driverVersion"]["version"], "550.54.15");
  EXPECT_EQ(a["cudaDriverVersion"]["version"], "12.4.0");
  EXPECT_EQ(a["resource.kubernetes.io/pcieRoot"]["string"], "pci0000:15");
  EXPECT_EQ(a["resource.kubernetes.io/pciBusID"]["string"], "0000:19:00.0");
  EXPECT_EQ(a["numaNode"]["int"], 0);
  EXPECT_EQ(d0["capacity"]["memory"]["value"], "81559Mi");
  // One NVSwitch fabric: every device in GPU 0's domain, the MIG instances with their GPU.
  std::map<int, int> per_numa;
  for (std::size_t i = 0; i < spec["devices"].size(); ++i) {
    const json& d = spec["devices"][i];
    if (i < 7) {
      EXPECT_EQ(d["name"], fmt::format("gpu-{}", i));
    }
    EXPECT_EQ(d["attributes"]["nvlinkDomain"]["int"], 0) << d["name"];
    ++per_numa[d["attributes"]["numaNode"]["int"].get<int>()];
    // The API's limit: 32 attributes and capacities together per device.
    EXPECT_LE(d["attributes"].size() + d["capacity"].size(), 32U);
  }
  EXPECT_EQ(per_numa, (std::map<int, int>{{0, 4}, {1, 6}}));
  const json& mig = spec["devices"][7];
  EXPECT_EQ(mig["name"], "gpu-7-mig-1-0");
  EXPECT_EQ(mig["attributes"]["profile"]["string"], "3g.40gb");
  EXPECT_EQ(mig["attributes"]["parentIndex"]["int"], 7);
  EXPECT_EQ(mig["attributes"]["resource.kubernetes.io/pciBusID"]["string"], "0000:df:00.0");
  EXPECT_EQ(spec["devices"][9]["name"], "gpu-7-mig-13-0");
}

TEST(DraResourceSlice, PcieOnlyGpusHaveNoNvlinkDomainAndASemanticDriverVersion) {
  const json s = slice_of("t4x2");
  ASSERT_EQ(s["spec"]["devices"].size(), 2U);
  for (const auto& d : s["spec"]["devices"]) {
    EXPECT_FALSE(d["attributes"].contains("nvlinkDomain")) << d["name"];
    // 535.104.05 has a leading zero, which semantic versioning refuses.
    EXPECT_EQ(d["attributes"]["driverVersion"]["version"], "535.104.5");
    EXPECT_EQ(d["attributes"]["cudaComputeCapability"]["version"], "7.5.0");
  }
}

TEST(DraResourceSlice, XgmiPeersShareADomain) {
  const json s = slice_of("mi250");
  for (const auto& d : s["spec"]["devices"]) {
    EXPECT_EQ(d["attributes"]["vendor"]["string"], "amd");
    EXPECT_TRUE(d["attributes"].contains("nvlinkDomain")) << d["name"];
    EXPECT_FALSE(d["attributes"].contains("cudaComputeCapability"));
  }
}

TEST(DraResourceSlice, MigInstancesReplaceTheirGpu) {
  const json s = slice_of("h100-mig");
  std::vector<std::string> names;
  for (const auto& d : s["spec"]["devices"]) names.push_back(d["name"]);
  ASSERT_GE(names.size(), 4U);
  EXPECT_EQ(names[0], "gpu-0-mig-1-0");
  const json& m = s["spec"]["devices"][0];
  EXPECT_EQ(m["attributes"]["type"]["string"], "mig");
  EXPECT_EQ(m["attributes"]["profile"]["string"], "3g.40gb");
  EXPECT_EQ(m["attributes"]["parentIndex"]["int"], 0);
  EXPECT_EQ(m["capacity"]["memory"]["value"], "40192Mi");
  EXPECT_EQ(std::count(names.begin(), names.end(), "gpu-0"), 0);
}

TEST(DraResourceSlice, SemanticVersions) {
  EXPECT_EQ(semantic_version("550.54.15"), "550.54.15");
  EXPECT_EQ(semantic_version("535.104.05"), "535.104.5");
  EXPECT_EQ(semantic_version("12.4"), "12.4.0");
  EXPECT_EQ(semantic_version("6.3.6"), "6.3.6");
  EXPECT_EQ(semantic_version("0.0.0"), "0.0.0");
  EXPECT_EQ(semantic_version(""), "");
  EXPECT_EQ(semantic_version("1.2.3.4"), "");
  EXPECT_EQ(semantic_version("6.3.6-rc1"), "");
  EXPECT_EQ(semantic_version("1..2"), "");
}

TEST(DraResourceSlice, NodeNameMustBeASubdomain) {
  SliceOptions o;
  o.node_name = "Node_1";
  const auto message =
      test::input_error([&] { (void)resource_slice(test::fixture_host("t4x2"), o); });
  EXPECT_NE(message.find("'Node_1' is not a DNS-1123 subdomain"), std::string::npos) << message;
}

}  // namespace
}  // namespace gpuorch::k8s::dra

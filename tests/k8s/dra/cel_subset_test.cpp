// The CEL subset of DRA selectors (k8s/mirror/cel_subset.hpp): what it evaluates, with CEL's
// meaning, and what it refuses by name; malformed input never crashes.
#include "gpuorch/k8s/mirror/cel_subset.hpp"

#include <gtest/gtest.h>

#include <random>

#include "gpuorch/k8s/manifests/manifests.hpp"

namespace gpuorch::k8s {
namespace {

SelectorDevice h100() {
  SelectorDevice d;
  d.driver = "gpu.gpuorch.io";
  d.attributes["gpu.gpuorch.io/type"] = std::string("gpu");
  d.attributes["gpu.gpuorch.io/productName"] = std::string("NVIDIA H100 80GB HBM3");
  d.attributes["gpu.gpuorch.io/index"] = std::int64_t{3};
  d.attributes["gpu.gpuorch.io/nvlinkDomain"] = std::int64_t{0};
  d.attributes["gpu.gpuorch.io/cudaComputeCapability"] = SemVer{9, 0, 0};
  d.attributes["gpu.gpuorch.io/mig"] = false;
  d.attributes["resource.kubernetes.io/pcieRoot"] = std::string("pci0000:15");
  d.capacity_milli["gpu.gpuorch.io/memory"] = 81559LL * 1024 * 1024 * 1000;
  return d;
}

bool eval(const std::string& e, const SelectorDevice& d = h100()) {
  return DeviceSelector::parse(e).matches(d);
}

TEST(CelSubset, EvaluatesTheSubsetWithCelsMeaning) {
  EXPECT_TRUE(eval(R"(device.driver == "gpu.gpuorch.io")"));
  EXPECT_FALSE(eval(R"(device.driver != "gpu.gpuorch.io")"));
  EXPECT_TRUE(eval(R"(device.attributes["gpu.gpuorch.io"].type == "gpu")"));
  EXPECT_TRUE(
      eval(R"(device.attributes["gpu.gpuorch.io"]["productName"] == 'NVIDIA H100 80GB HBM3')"));
  EXPECT_TRUE(eval(
      R"(device.attributes["gpu.gpuorch.io"].index >= 3 && device.attributes["gpu.gpuorch.io"].index < 4)"));
  EXPECT_FALSE(eval(R"(device.attributes["gpu.gpuorch.io"].index > 3)"));
  EXPECT_TRUE(eval(R"(device.attributes["gpu.gpuorch.io"].index <= -1 || true)"));
  EXPECT_TRUE(eval(R"(!device.attributes["gpu.gpuorch.io"].mig)"));
  EXPECT_TRUE(eval(R"(!(device.attributes["gpu.gpuorch.io"].type == "mig"))"));
  EXPECT_TRUE(eval(R"(device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:15")"));
  EXPECT_TRUE(eval(R"(device.capacity["gpu.gpuorch.io"].memory.compareTo(quantity("40Gi")) >= 0)"));
  EXPECT_TRUE(eval(R"(device.capacity["gpu.gpuorch.io"].memory.isGreaterThan(quantity("79Gi")))"));
  EXPECT_FALSE(eval(R"(device.capacity["gpu.gpuorch.io"].memory.isLessThan(quantity("79Gi")))"));
  EXPECT_TRUE(eval(
      R"(device.attributes["gpu.gpuorch.io"].cudaComputeCapability.isGreaterThan(semver("8.9.0")))"));
  EXPECT_TRUE(
      eval(R"(device.attributes["gpu.gpuorch.io"].cudaComputeCapability == semver("9.0.0"))"));
  EXPECT_TRUE(eval(R"(device.attributes["gpu.gpuorch.io"].type in ["gpu", "mig"])"));
  EXPECT_FALSE(eval(R"(device.attributes["gpu.gpuorch.io"].index in [0, 1, 2])"));
  EXPECT_TRUE(eval(R"("uuid" in device.attributes["gpu.gpuorch.io"] || true)"));
  EXPECT_TRUE(eval(R"("gpu.gpuorch.io" in device.attributes)"));
  EXPECT_FALSE(eval(R"("example.com" in device.attributes)"));
  EXPECT_TRUE(eval(R"(has(device.attributes["gpu.gpuorch.io"].nvlinkDomain))"));
  EXPECT_FALSE(eval(R"(has(device.attributes["gpu.gpuorch.io"].uuid))"));
  EXPECT_TRUE(eval(R"(device.attributes["gpu.gpuorch.io"].productName.startsWith("NVIDIA H100"))"));
  EXPECT_TRUE(eval(R"(device.attributes["gpu.gpuorch.io"].productName.contains("80GB"))"));
  EXPECT_FALSE(eval(R"(device.attributes["gpu.gpuorch.io"].productName.endsWith("PCIe"))"));
}

TEST(CelSubset, RuntimeErrorsFollowCelsLogic) {
  // A missing attribute is an error, as in CEL; && and || decide around it when they can.
  EXPECT_THROW((void)eval(R"(device.attributes["gpu.gpuorch.io"].uuid == "x")"), SelectorError);
  EXPECT_FALSE(eval(R"(device.driver == "other" && device.attributes["other"].x == 1)"));
  EXPECT_FALSE(eval(R"(device.attributes["other"].x == 1 && device.driver == "other")"));
  EXPECT_TRUE(eval(R"(device.attributes["other"].x == 1 || device.driver == "gpu.gpuorch.io")"));
  EXPECT_THROW((void)eval(R"(device.attributes["gpu.gpuorch.io"].index == "3")"), SelectorError);
  EXPECT_THROW((void)eval(R"(device.attributes["gpu.gpuorch.io"].type < 3)"), SelectorError);
  EXPECT_THROW((void)eval(R"(device.driver)"), SelectorError);  // not a bool
}

TEST(CelSubset, RefusesWhatIsOutsideTheSubsetByName) {
  const std::pair<const char*, const char*> outside[] = {
      {R"(device.attributes["d"].x.matches("^a"))", "method 'matches'"},
      {R"(size(device.attributes) > 1)", "function 'size'"},
      {R"(device.attributes.exists(k, k == "x"))", "method 'exists'"},
      {R"(request.count == 1)", "identifier 'request'"},
      {R"(device.allowMultipleAllocations)", "device.allowMultipleAllocations"},
      {R"(device.driver == "a" ? true : false)", "'?'"},
      {R"(1.5 > 1)", "int literals"},
      {R"(r"raw" == "x")", "identifier 'r'"},
  };
  for (const auto& [text, named] : outside) {
    try {
      (void)DeviceSelector::parse(text).matches(h100());
      ADD_FAILURE() << text << " was taken";
    } catch (const SelectorError& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << text << ": " << e.what();
    }
  }
}

TEST(CelSubset, TheShippedDeviceClassesAreInsideTheSubset) {
  ManifestOptions o;
  o.dra = true;
  int classes = 0;
  for (const auto& m : make_manifests(o)) {
    if (m.object.value("kind", "") != "DeviceClass") continue;
    ++classes;
    for (const auto& s : m.object["spec"]["selectors"]) {
      const std::string e = s["cel"]["expression"].get<std::string>();
      const DeviceSelector sel = DeviceSelector::parse(e);
      SelectorDevice d = h100();
      const bool mig_class = m.object["metadata"]["name"] == "mig.gpuorch.io";
      EXPECT_EQ(sel.matches(d), !mig_class) << e;
      d.driver = "other.example.com";
      EXPECT_FALSE(sel.matches(d)) << e;  // && decides before the missing attribute
    }
  }
  EXPECT_EQ(classes, 2);
}

TEST(CelSubset, MalformedInputNeverCrashes) {
  const char* malformed[] = {"",
                             "(",
                             ")",
                             "device.",
                             "device[",
                             "device.attributes[\"a\"",
                             "\"unterminated",
                             "'\\",
                             "1 +",
                             "99999999999999999999 == 1",
                             "&& ||",
                             "has(1)",
                             "quantity()",
                             "quantity(\"1\", \"2\")",
                             "device.driver == \"a\" garbage",
                             "-9223372036854775808 == 1",
                             "\x01\x02\xff"};
  for (const char* m : malformed) {
    EXPECT_THROW((void)DeviceSelector::parse(m).matches(h100()), SelectorError) << m;
  }
  // Deep nesting is refused, not recursed into.
  EXPECT_THROW(
      (void)DeviceSelector::parse(std::string(5000, '(') + "true" + std::string(5000, ')')),
      SelectorError);
  EXPECT_THROW((void)DeviceSelector::parse(std::string(5000, '!') + "true"), SelectorError);
  EXPECT_THROW((void)DeviceSelector::parse(std::string(20000, ' ') + "true"), SelectorError);
  // Random bytes and random tokens: an answer or SelectorError, nothing else.
  std::mt19937 rng(7);
  const char* pieces[] = {"device",    ".",  "attributes", "[",   "]",     "\"gpu.gpuorch.io\"",
                          "(",         ")",  "==",         "!=",  "&&",    "||",
                          "!",         "in", "[1,2]",      "has", "index", "quantity",
                          "compareTo", ",",  "3",          "-",   "<",     "'x'"};
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) {
      if (rng() % 5 == 0) {
        text += static_cast<char>(rng() % 256);
      } else {
        text += pieces[rng() % std::size(pieces)];
      }
    }
    try {
      (void)DeviceSelector::parse(text).matches(h100());
    } catch (const SelectorError&) {
    }
  }
}

}  // namespace
}  // namespace gpuorch::k8s

// NVIDIA's own device-plugin configs (tests/fixtures/nvidia-plugin-configs: the README's
// examples, the helm chart's, and the cases of api/config/v1's tests, each written from those
// facts) get NVIDIA's verdict here: what NVIDIA accepts loads and advertises what NVIDIA's plugin
// advertises on the fixture host; what NVIDIA refuses is one `file:line: what` (or `file: what`)
// error.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "gpuorch/base/error.hpp"
#include "gpuorch/k8s/deviceplugin/config.hpp"
#include "gpuorch/k8s/deviceplugin/resources.hpp"
#include "k8s/k8s_support.hpp"
#include "support/test_support.hpp"

namespace gpuorch::k8s {
namespace {

struct Verdict {
  std::string host, nvidia, advertises;
};

// The fixture's header: "# host: t4x2", "# nvidia: accept|reject", "# advertises: name=n,...".
Verdict verdict_of(const std::string& text) {
  Verdict v;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line) && line.starts_with("# ")) {
    const auto colon = line.find(": ");
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(2, colon - 2), value = line.substr(colon + 2);
    if (key == "host") v.host = value;
    if (key == "nvidia") v.nvidia = value;
    if (key == "advertises") v.advertises = value;
  }
  return v;
}

std::string advertised(const std::vector<Resource>& rs) {
  std::map<std::string, std::size_t> counts;
  for (const auto& r : rs) counts[r.name] += r.devices.size();
  std::string out;
  for (const auto& [name, n] : counts)
    out += (out.empty() ? "" : ",") + name + "=" + std::to_string(n);
  return out;
}

TEST(NvidiaPluginConfigs, SameVerdictAsNvidia) {
  const auto dir = std::filesystem::path(test::fixture("nvidia-plugin-configs"));
  int accepted = 0, rejected = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string path = entry.path().string();
    const auto v = verdict_of(test::read_text(path));
    ASSERT_TRUE(v.nvidia == "accept" || v.nvidia == "reject") << path;
    const auto host = test::fixture_host(v.host);
    std::string got, error;
    try {
      const auto c = load_config(path);
      validate_effective(c);
      got = advertised(plan_resources(host, c));
    } catch (const base::InputError& e) {
      error = e.what();
    }
    if (v.nvidia == "accept") {
      ++accepted;
      EXPECT_EQ(error, "") << path;
      EXPECT_EQ(got, v.advertises) << path;
    } else {
      ++rejected;
      EXPECT_EQ(error.rfind(path + ":", 0), 0u) << path << ": " << error;
      EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    }
  }
  EXPECT_GE(accepted, 15);
  EXPECT_GE(rejected, 15);
}

}  // namespace
}  // namespace gpuorch::k8s

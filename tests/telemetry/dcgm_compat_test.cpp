// gpuorch exporter as a drop-in for dcgm-exporter: its field names and types from a counters
// file, its labels (MIG, driver version, pods), /health, and the comparison table of
// docs/telemetry.md checked against a scrape of a recorded host.
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "../topology/fixture_hosts.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/telemetry/collectors.hpp"
#include "gpuorch/telemetry/exporter.hpp"
#include "gpuorch/telemetry/prometheus.hpp"
#include "support/paths.hpp"

namespace gpuorch::telemetry {
namespace {

struct Recorded {
  topology::Host host;
  std::unique_ptr<Sampler> sampler;
};

Recorded recorded(const std::string& name) {
  auto d = testing::discover_fixture(testing::topo_fixture(name));
  Recorded r{d.host, nullptr};
  r.sampler = std::make_unique<Sampler>(d.host, std::move(d.nvml), testing::topo_fixture(name));
  return r;
}

// The value of the one series of `name` whose labels contain every `needle`.
std::optional<double> value_of(const std::string& page, const std::string& name,
                               std::initializer_list<std::string> needles) {
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + "{", 0) != 0) continue;
    bool all = true;
    for (const auto& n : needles) all = all && line.find(n) != std::string::npos;
    if (all) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return std::nullopt;
}

TEST(DcgmCompat, DefaultCountersOfARecordedDgx) {
  auto r = recorded("dgx-h100");
  const std::string page = render_metrics(r.host, r.sampler->sample(), {1, 0});
  // dcgm-exporter 4.8.3's types and help texts.
  EXPECT_NE(page.find("# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
                      "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"),
            std::string::npos);
  EXPECT_NE(page.find("# TYPE DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS counter\n"), std::string::npos);
  EXPECT_NE(page.find("# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge\n"), std::string::npos);
  // Not in 4.8.3's default file: left out unless a counters file asks.
  EXPECT_EQ(page.find("DCGM_FI_DEV_PCIE_TX_THROUGHPUT"), std::string::npos);
  EXPECT_EQ(page.find("DCGM_FI_DEV_VGPU_LICENSE_STATUS"), std::string::npos);
  // The recording's last XID (79 on GPU 5), 0 elsewhere; GPM percent -> DCGM ratio.
  EXPECT_EQ(value_of(page, "DCGM_FI_DEV_XID_ERRORS", {"gpu=\"5\""}), 79);
  EXPECT_EQ(value_of(page, "DCGM_FI_DEV_XID_ERRORS", {"gpu=\"0\""}), 0);
  EXPECT_NEAR(*value_of(page, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", {"gpu=\"0\""}), 0.534, 1e-12);
  EXPECT_DOUBLE_EQ(*value_of(page, "DCGM_FI_PROF_PCIE_RX_BYTES", {"gpu=\"0\""}), 3.25 * 1048576);
  EXPECT_EQ(value_of(page, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", {"gpu=\"3\""}), 1);
  // Free = total - used - reserved (MiB).
  const double total = 85520809984.0 / 1048576;
  const double used = *value_of(page, "DCGM_FI_DEV_FB_USED", {"gpu=\"0\"", "Hostname="});
  EXPECT_NEAR(*value_of(page, "DCGM_FI_DEV_FB_FREE", {"gpu=\"0\",UUID"}),
              total - used - 549453824.0 / 1048576, 1e-6);
  // The driver version, a label-type field, on every DCGM series.
  EXPECT_NE(page.find(",Hostname=\"dgx-h100-01\",DCGM_FI_DRIVER_VERSION=\"" +
                      r.host.driver_version + "\"} "),
            std::string::npos);
}

TEST(DcgmCompat, MigInstancesCarryGpuInstanceLabels) {
  auto r = recorded("dgx-h100");
  const std::string page = render_metrics(r.host, r.sampler->sample(), {1, 0});
  const auto v = value_of(page, "DCGM_FI_DEV_FB_USED",
                          {"gpu=\"7\"", "GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\",Hostname="});
  ASSERT_TRUE(v) << page.substr(0, 3000);
  EXPECT_NEAR(*v, 5268045824.0 / 1048576, 1e-6);
  EXPECT_TRUE(value_of(page, "DCGM_FI_DEV_FB_FREE", {"GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"13\""}));
  // Whole-GPU fields have no MIG labels.
  EXPECT_EQ(page.find("DCGM_FI_DEV_GPU_TEMP{gpu=\"7\",UUID=\"" + r.host.gpus[7].uuid +
                      "\",pci_bus_id=\"00000000:DF:00.0\",device=\"nvidia7\",modelName=\"NVIDIA "
                      "H100 80GB HBM3\",GPU_I"),
            std::string::npos);
}

TEST(DcgmCompat, CountersFileChoosesFieldsTypesAndHelp) {
  const auto c = parse_collectors(
      "# Format\n"
      "# DCGM FIELD, Prometheus metric type, help message\n\n"
      "DCGM_FI_DEV_GPU_UTIL ,  gauge, Busy, in percent, sampled.\n"
      "DCGM_FI_DEV_PCIE_TX_THROUGHPUT, counter, PCIe TX (in KB).\n"
      "DCGM_FI_DEV_VGPU_LICENSE_STATUS, gauge, vGPU License status\n",
      "my.csv");
  ASSERT_EQ(c.size(), 3u);
  auto r = recorded("dgx-h100");
  RenderOptions o;
  o.collectors = c;
  const std::string page = render_metrics(r.host, r.sampler->sample(), {1, 0}, o);
  EXPECT_NE(page.find("# HELP DCGM_FI_DEV_GPU_UTIL Busy, in percent, sampled.\n"),
            std::string::npos);
  EXPECT_NE(page.find("# TYPE DCGM_FI_DEV_PCIE_TX_THROUGHPUT counter\n"), std::string::npos);
  EXPECT_EQ(page.find("DCGM_FI_DEV_FB_USED"), std::string::npos);
  EXPECT_EQ(page.find("DCGM_FI_DEV_VGPU_LICENSE_STATUS"), std::string::npos);  // no NVML source
  EXPECT_EQ(page.find("DCGM_FI_DRIVER_VERSION"), std::string::npos);           // not asked for
  EXPECT_LT(page.find("DCGM_FI_DEV_GPU_UTIL"), page.find("DCGM_FI_DEV_PCIE_TX_THROUGHPUT"));
}

std::string error_of(const std::string& text) {
  try {
    parse_collectors(text, "my.csv");
  } catch (const base::InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(DcgmCompat, CountersFileErrorsNameTheLine) {
  EXPECT_EQ(error_of("# c\nDCGM_FI_DEV_GPU_UTIL, gauge, x\nDCGM_FI_DEV_FOO, gauge, y\n"),
            "my.csv:3: unknown DCGM field 'DCGM_FI_DEV_FOO' (the fields gpuorch knows are listed "
            "in docs/telemetry.md)");
  EXPECT_EQ(error_of("DCGM_FI_DEV_GPU_UTIL gauge\n"), "my.csv:1: expected 'FIELD, TYPE, HELP'");
  EXPECT_EQ(error_of("\nDCGM_FI_DEV_GPU_UTIL, summary, x\n"),
            "my.csv:2: type 'summary' of DCGM_FI_DEV_GPU_UTIL is not gauge, counter or label");
  EXPECT_EQ(error_of("DCGM_FI_DEV_GPU_UTIL, label, x\n"),
            "my.csv:1: DCGM_FI_DEV_GPU_UTIL is a value, not a label");
  EXPECT_EQ(error_of("DCGM_EXP_XID_ERRORS_COUNT, gauge, x\n")
                .rfind("my.csv:1: unknown DCGM field 'DCGM_EXP_XID_ERRORS_COUNT'", 0),
            0u);
}

TEST(DcgmCompat, PodLabelsFromTheKubeletsAnswer) {
  auto r = recorded("dgx-h100");
  RenderOptions o;
  // GPU 0 shared by two containers (replicas), GPU 7's 3g.40gb instance held by one.
  o.pods[r.host.gpus[0].uuid] = {{"train-0", "ml", "worker"}, {"eval-1", "ml", "eval"}};
  o.pods[r.host.gpus[7].mig.instances[0].uuid] = {{"mig-pod", "team", "main"}};
  const std::string page = render_metrics(r.host, r.sampler->sample(), {1, 0}, o);
  EXPECT_TRUE(value_of(page, "DCGM_FI_DEV_GPU_UTIL",
                       {"gpu=\"0\"", ",container=\"worker\",namespace=\"ml\",pod=\"train-0\""}));
  EXPECT_TRUE(value_of(page, "DCGM_FI_DEV_GPU_UTIL",
                       {"gpu=\"0\"", ",container=\"eval\",namespace=\"ml\",pod=\"eval-1\""}));
  EXPECT_TRUE(
      value_of(page, "DCGM_FI_DEV_FB_USED",
               {"GPU_I_ID=\"1\"", "container=\"main\",namespace=\"team\",pod=\"mig-pod\""}));
  EXPECT_FALSE(value_of(page, "DCGM_FI_DEV_GPU_UTIL", {"gpu=\"1\"", "pod="}));
  // device-name IDs: "nvidia1".
  RenderOptions byname;
  byname.pods_by_device_name = true;
  byname.pods["nvidia1"] = {{"p", "n", "c"}};
  const std::string page2 = render_metrics(r.host, r.sampler->sample(), {1, 0}, byname);
  EXPECT_TRUE(value_of(page2, "DCGM_FI_DEV_GPU_UTIL", {"gpu=\"1\"", "pod=\"p\""}));
  EXPECT_EQ(physical_device_id("GPU-abc::3"), "GPU-abc");
  EXPECT_EQ(physical_device_id("MIG-abc"), "MIG-abc");
}

TEST(DcgmCompat, HealthAnswersLikeDcgmExporter) {
  auto r = recorded("dgx-h100");
  ExporterOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  o.interval = std::chrono::milliseconds(100);
  int asked = 0;
  o.pods = [&asked] {
    ++asked;
    return PodAssignments{{"GPU-none", {{"p", "n", "c"}}}};
  };
  Exporter e(r.host, std::move(r.sampler), o);
  const int port = e.start();
  httplib::Client c("127.0.0.1", port);
  const auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(h->body, "OK");
  const auto hz = c.Get("/healthz");
  ASSERT_TRUE(hz);
  EXPECT_EQ(hz->body, "ok\n");
  e.stop();
  EXPECT_GE(asked, 1);  // the kubelet is asked on the sampler thread, before the first page
  EXPECT_EQ(ExporterOptions{}.port, 9400);
  EXPECT_EQ(ExporterOptions{}.address, "0.0.0.0");
}

// docs/telemetry.md's table: each "same" row's field, with its stated type, is in a scrape of
// the recorded DGX-H100 when a counters file lists it.
TEST(TelemetryDocs, SameMetricsAreScraped) {
  std::ifstream in(std::string(test::source_dir()) + "/docs/telemetry.md");
  ASSERT_TRUE(in);
  const std::regex row(R"(^\| `(DCGM_[A-Z0-9_]+)`[^|]*\| (gauge|counter|label) \| ([^|]+)\|)");
  std::string line, csv;
  std::vector<std::pair<std::string, std::string>> same;
  int rows = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    ++rows;
    if (m[3].str().rfind("same", 0) != 0) continue;
    same.emplace_back(m[1], m[2]);
    csv += m[1].str() + ", " + m[2].str() + ", from the docs table\n";
  }
  EXPECT_GE(rows, 33);
  ASSERT_GE(same.size(), 28u);
  auto r = recorded("dgx-h100");
  RenderOptions o;
  o.collectors = parse_collectors(csv, "docs/telemetry.md");
  const std::string page = render_metrics(r.host, r.sampler->sample(), {1, 0}, o);
  for (const auto& [name, type] : same) {
    if (type == "label") {
      EXPECT_NE(page.find("," + name + "=\""), std::string::npos) << name;
    } else {
      EXPECT_NE(page.find("# TYPE " + name + " " + type + "\n" + name + "{gpu=\"0\","),
                std::string::npos)
          << name;
    }
  }
  // And the built-in default list is the table's default rows (26, commented ones excluded).
  EXPECT_EQ(default_collectors().size(), 26u);
}

}  // namespace
}  // namespace gpuorch::telemetry

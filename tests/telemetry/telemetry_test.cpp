#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <regex>
#include <thread>

#include "../topology/fixture_hosts.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/telemetry/dmon.hpp"
#include "gpuorch/telemetry/exporter.hpp"
#include "gpuorch/telemetry/http_server.hpp"
#include "gpuorch/telemetry/prometheus.hpp"
#include "support/net.hpp"

namespace gpuorch::telemetry {
namespace {

std::unique_ptr<Sampler> sampler_for(const std::string& host, topology::Host* out = nullptr) {
  auto d = testing::discover_fixture(testing::topo_fixture(host));
  if (out) *out = d.host;
  return std::make_unique<Sampler>(d.host, std::move(d.nvml), testing::topo_fixture(host));
}

TEST(Sampler, RecordedNvmlReplays) {
  auto s = sampler_for("dgx-h100");
  const Round a = s->sample();
  const Round b = s->sample();
  ASSERT_EQ(a.gpus.size(), 8u);
  EXPECT_TRUE(a.gpus[0].ok);
  EXPECT_EQ(*a.gpus[0].gpu_util, 97);
  EXPECT_EQ(*b.gpus[0].gpu_util, 95);
  EXPECT_EQ(*a.gpus[0].power_w, 650);
  EXPECT_EQ(*a.gpus[1].memory_used_mib, 70001);
}

TEST(Sampler, AmdSysfs) {
  auto s = sampler_for("mi250");
  const Round r = s->sample();
  ASSERT_EQ(r.gpus.size(), 4u);
  EXPECT_TRUE(r.gpus[1].ok);
  EXPECT_EQ(*r.gpus[1].gpu_util, 81);
  EXPECT_EQ(*r.gpus[1].temperature_c, 46);
  EXPECT_EQ(*r.gpus[1].power_w, 301);
  EXPECT_EQ(*r.gpus[1].sm_clock_mhz, 1700);
  EXPECT_EQ(*r.gpus[1].memory_used_mib, 13 * 1024);
}

TEST(Sampler, NvidiaWithoutNvmlSaysWhy) {
  auto d = testing::discover_fixture(testing::topo_fixture("t4x2"), false);
  Sampler s(d.host, nullptr, testing::topo_fixture("t4x2"));
  const Round r = s.sample();
  ASSERT_EQ(r.gpus.size(), 2u);
  EXPECT_FALSE(r.gpus[0].ok);
  EXPECT_EQ(r.gpus[0].error, "NVML not available");
  EXPECT_NE(dmon_row(r.gpus[0], {}).find("error: NVML not available"), std::string::npos);
}

TEST(Dmon, RowsAndRates) {
  GpuSample a;
  a.ok = true;
  a.nvlink_tx_bytes = 1e9;
  GpuSample b = a;
  b.nvlink_tx_bytes = 3e9;
  b.gpu_util = 42;
  const Rates r = rates(b, &a, 2.0);
  EXPECT_DOUBLE_EQ(*r.nvlink_tx_mbps, 1000);
  const std::string row = dmon_row(b, r);
  EXPECT_NE(row.find("   42"), std::string::npos);
  EXPECT_NE(row.find("    1000"), std::string::npos);
  EXPECT_EQ(dmon_header().substr(0, 5), "# gpu");
}

// Every sample line is NAME{LABELS} VALUE or NAME VALUE, and every family has HELP and TYPE.
void expect_valid_exposition(const std::string& text) {
  const std::regex sample(
      R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?[0-9.e+-]+$)");
  std::istringstream in(text);
  std::string line;
  int samples = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) continue;
    EXPECT_TRUE(std::regex_match(line, sample)) << line;
    ++samples;
  }
  EXPECT_GT(samples, 0);
}

TEST(Prometheus, DcgmNamesAndLabels) {
  topology::Host host;
  auto s = sampler_for("dgx-h100", &host);
  const std::string text = render_metrics(host, s->sample(), {1, 0});
  EXPECT_NE(
      text.find("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"" + host.gpus[0].uuid +
                "\",pci_bus_id=\"00000000:19:00.0\",device=\"nvidia0\",modelName=\"NVIDIA "
                "H100 80GB HBM3\",Hostname=\"dgx-h100-01\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"} "
                "97\n"),
      std::string::npos)
      << text.substr(0, 2000);
  for (const char* name :
       {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "gpuorch_gpu_info",
        "gpuorch_topology_link", "gpuorch_nic_port_rate_gbps"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
  }
  EXPECT_NE(text.find("gpuorch_topology_link{a=\"GPU0\",b=\"GPU1\",path=\"NV18\""),
            std::string::npos);
  expect_valid_exposition(text + render_sample_age(0.25));
}

TEST(Exporter, ServesMetricsAndHealth) {
  topology::Host host;
  auto s = sampler_for("mi250", &host);
  ExporterOptions o;
  o.port = 0;
  o.interval = std::chrono::milliseconds(50);
  Exporter e(host, std::move(s), o);
  const int port = e.start();
  ASSERT_GT(port, 0);
  httplib::Client c("127.0.0.1", port);
  const auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""), std::string::npos);
  expect_valid_exposition(m->body);
  const auto h = c.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(h->body, "ok\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto again = c.Get("/metrics");
  ASSERT_TRUE(again);
  // The sampler kept going between scrapes.
  std::smatch rounds;
  ASSERT_TRUE(
      std::regex_search(again->body, rounds, std::regex(R"(gpuorch_exporter_rounds_total (\d+))")));
  EXPECT_GE(std::stoi(rounds[1]), 2);
  e.stop();
  e.stop();
}

using test::open_loopback;

// Seconds one GET /metrics takes on a fresh connection; a negative number when it failed.
double time_scrape(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(std::chrono::seconds(10));
  c.set_read_timeout(std::chrono::seconds(10));
  const auto start = std::chrono::steady_clock::now();
  const auto res = c.Get("/metrics");
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  return res && res->status == 200 ? took.count() : -1.0;
}

// Slowloris: 200 connections that each send a request line and then one header line every 2 s,
// and 200 that never send a byte, held open while /metrics is scraped. Each used to hold one of
// httplib's 32 workers: scrapes waited 29-40 s. A scrape must be answered within 1 s (it takes
// milliseconds; the bound is a generous margin, not a benchmark).
TEST(Exporter, ScrapesAreAnsweredDuringSlowloris) {
  topology::Host host;
  auto s = sampler_for("mi250", &host);
  ExporterOptions o;
  o.port = 0;
  Exporter e(host, std::move(s), o);
  const int port = e.start();
  ASSERT_GT(port, 0);
  std::vector<int> slow, silent;
  for (int i = 0; i < 200; ++i) {
    const int fd = open_loopback(port);
    ASSERT_GE(fd, 0);
    const std::string start = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
    ASSERT_EQ(::send(fd, start.data(), start.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(start.size()));
    slow.push_back(fd);
  }
  for (int i = 0; i < 200; ++i) {
    const int fd = open_loopback(port);
    ASSERT_GE(fd, 0);
    silent.push_back(fd);
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    for (int round = 0; !done; ++round) {
      for (int k = 0; k < 20 && !done; ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const std::string line = "X-Slow-" + std::to_string(round) + ": 1\r\n";
      for (const int fd : slow) ::send(fd, line.data(), line.size(), MSG_NOSIGNAL);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // every connection accepted
  const double first = time_scrape(port);
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));  // past the first trickle
  const double later = time_scrape(port);
  done = true;
  trickle.join();
  for (const int fd : slow) ::close(fd);
  for (const int fd : silent) ::close(fd);
  e.stop();
  EXPECT_GE(first, 0.0) << "the scrape failed";
  EXPECT_LT(first, 1.0);
  EXPECT_GE(later, 0.0) << "the scrape failed";
  EXPECT_LT(later, 1.0);
}

TEST(HttpServer, ListenScopeSaysWhoCanReachIt) {
  EXPECT_EQ(host_port("0.0.0.0", 9401), "0.0.0.0:9401");
  EXPECT_EQ(host_port("::1", 9401), "[::1]:9401");
  EXPECT_EQ(listen_scope("0.0.0.0"), "every IPv4 interface");
  EXPECT_EQ(listen_scope("::"), "every interface");
  EXPECT_EQ(listen_scope("127.0.0.1"), "loopback only");
  EXPECT_EQ(listen_scope("10.1.2.3"), "this address only");
}

TEST(Exporter, ListenParsing) {
  EXPECT_EQ(parse_listen("0.0.0.0:9400", {}).address, "0.0.0.0");
  EXPECT_EQ(parse_listen("[::1]:9", {}).address, "::1");
  EXPECT_EQ(parse_listen(":9401", {}).port, 9401);
  EXPECT_THROW(parse_listen("127.0.0.1", {}), gpuorch::base::InputError);
  EXPECT_THROW(parse_listen("127.0.0.1:99999", {}), gpuorch::base::InputError);
}

}  // namespace
}  // namespace gpuorch::telemetry

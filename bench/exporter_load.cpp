// Loopback load on `gpuorch exporter`: N concurrent clients x M scrapes of /metrics, reporting
// errors and latency percentiles. By default it serves a recorded 8-GPU host in-process, so the
// figure measures the exporter, not a GPU.
//   exporter_load [--sysfs-root DIR] [--clients 8] [--scrapes 1000] [--port P]
// With --port it scrapes an exporter already running on 127.0.0.1:P instead.
#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/discover/discover.hpp"
#include "gpuorch/telemetry/exporter.hpp"

int main(int argc, char** argv) {
  std::string root = "tests/fixtures/topo/dgx-h100";
  int clients = 8, scrapes = 1000, port = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--sysfs-root")
      root = argv[i + 1];
    else if (flag == "--clients")
      clients = std::atoi(argv[i + 1]);
    else if (flag == "--scrapes")
      scrapes = std::atoi(argv[i + 1]);
    else if (flag == "--port")
      port = std::atoi(argv[i + 1]);
    else {
      fmt::print(stderr, "unknown flag {}\n", flag);
      return 2;
    }
  }
  if (clients < 1 || clients > 256 || scrapes < 1 || scrapes > 1000000) {
    fmt::print(stderr, "--clients 1-256, --scrapes 1-1000000\n");
    return 2;
  }
  std::unique_ptr<gpuorch::telemetry::Exporter> exporter;
  if (port == 0) {
    gpuorch::discover::Options o;
    o.root = root;
    auto d = gpuorch::discover::discover_host(o);
    auto sampler = std::make_unique<gpuorch::telemetry::Sampler>(d.host, std::move(d.nvml), root);
    gpuorch::telemetry::ExporterOptions eo;
    eo.port = 0;
    eo.interval = std::chrono::milliseconds(100);  // sampling busier than any real setting
    exporter = std::make_unique<gpuorch::telemetry::Exporter>(d.host, std::move(sampler), eo);
    port = exporter->start();
  }
  std::vector<std::vector<double>> latency(static_cast<std::size_t>(clients));
  std::vector<int> errors(static_cast<std::size_t>(clients), 0);
  std::vector<std::size_t> bytes(static_cast<std::size_t>(clients), 0);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      const auto k = static_cast<std::size_t>(c);
      httplib::Client client("127.0.0.1", port);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      client.set_read_timeout(5, 0);
      latency[k].reserve(static_cast<std::size_t>(scrapes));
      for (int i = 0; i < scrapes; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const auto res = client.Get("/metrics");
        const auto t1 = std::chrono::steady_clock::now();
        latency[k].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        if (!res || res->status != 200 ||
            res->body.find("DCGM_FI_DEV_GPU_UTIL") == std::string::npos) {
          ++errors[k];
        } else {
          bytes[k] += res->body.size();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> all;
  int error_count = 0;
  std::size_t total_bytes = 0;
  for (int c = 0; c < clients; ++c) {
    const auto k = static_cast<std::size_t>(c);
    all.insert(all.end(), latency[k].begin(), latency[k].end());
    error_count += errors[k];
    total_bytes += bytes[k];
  }
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all[std::min(all.size() - 1,
                        static_cast<std::size_t>(p * static_cast<double>(all.size())))];
  };
  fmt::print(
      "exporter_load: {} clients x {} scrapes = {} requests in {:.2f} s ({:.0f}/s), "
      "{} errors, page {} bytes\n",
      clients, scrapes, all.size(), wall, static_cast<double>(all.size()) / wall, error_count,
      all.size() > static_cast<std::size_t>(error_count)
          ? total_bytes / (all.size() - static_cast<std::size_t>(error_count))
          : 0);
  fmt::print("latency ms: p50 {:.3f}  p90 {:.3f}  p99 {:.3f}  max {:.3f}\n", pct(0.50), pct(0.90),
             pct(0.99), all.back());
  if (exporter) exporter->stop();
  return error_count == 0 ? 0 : 1;
}

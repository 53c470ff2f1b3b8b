#pragma once
// The Prometheus exporter: /metrics, /health (dcgm-exporter's) and /healthz over HTTP
// (cpp-httplib). A sampling thread reads the GPUs every interval, asks the kubelet whose pods
// hold them (when asked to), and renders the page; a scrape only copies the latest page, so a
// slow or hung GPU query never blocks a scrape (the page's age says how fresh it is).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "gpuorch/telemetry/prometheus.hpp"
#include "gpuorch/telemetry/sampler.hpp"
#include "gpuorch/topology/host.hpp"

namespace httplib {
class Server;
}

namespace gpuorch::telemetry {

struct ExporterOptions {
  // dcgm-exporter's ":9400": every interface, as a DaemonSet scraped over the pod network needs
  // (docs/telemetry.md says why gpuorch follows it rather than loopback).
  std::string address = "0.0.0.0";
  int port = 9400;  // 0: any free port
  std::chrono::milliseconds interval{1000};
  RenderOptions render;  // the counters file's fields; `pods` is filled by `pods` below
  // Whose containers hold which device, asked once a reading (the kubelet's pod-resources API);
  // empty: no pod labels. Throws nothing: a failure is an empty answer and a note.
  std::function<PodAssignments()> pods;
};

// "127.0.0.1:9400", "0.0.0.0:9400", "[::1]:9400", ":9400"; throws base::InputError.
ExporterOptions parse_listen(const std::string& listen, ExporterOptions base);

class Exporter {
 public:
  Exporter(topology::Host host, std::unique_ptr<Sampler> sampler, ExporterOptions options);
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // Binds and starts sampling and serving in background threads; returns the bound port.
  // Throws base::InputError when the address cannot be bound.
  int start();
  // Stops serving and sampling; idempotent.
  void stop();

  // What a scrape returns now (also used by tests without HTTP).
  [[nodiscard]] std::string metrics() const;
  [[nodiscard]] bool healthy(std::string& why) const;

 private:
  void sample_loop();
  // The render options of this round: the counters, and the kubelet's answer of now.
  [[nodiscard]] RenderOptions render_options() const;

  topology::Host host_;
  std::unique_ptr<Sampler> sampler_;
  ExporterOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread serve_thread_, sample_thread_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::shared_ptr<const std::string> page_;  // latest rendered page, swapped under mutex_
  std::chrono::steady_clock::time_point page_time_;
  std::uint64_t rounds_ = 0, gpu_errors_ = 0;
};

}  // namespace gpuorch::telemetry

#include "gpuorch/telemetry/exporter.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <charconv>

#include "gpuorch/base/error.hpp"
#include "gpuorch/telemetry/http_server.hpp"
#include "gpuorch/telemetry/prometheus.hpp"

namespace gpuorch::telemetry {

ExporterOptions parse_listen(const std::string& listen, ExporterOptions base) {
  const std::size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    base::fail_input(fmt::format("--listen '{}': expected ADDRESS:PORT", listen));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port = listen.substr(colon + 1);
  int p = -1;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || end != port.data() + port.size() || p < 0 || p > 65535) {
    base::fail_input(fmt::format("--listen '{}': port must be 0-65535", listen));
  }
  base.address = host.empty() ? "0.0.0.0" : host;
  base.port = p;
  return base;
}

Exporter::Exporter(topology::Host host, std::unique_ptr<Sampler> sampler, ExporterOptions options)
    : host_(std::move(host)), sampler_(std::move(sampler)), options_(std::move(options)) {}

Exporter::~Exporter() { stop(); }

int Exporter::start() {
  server_ = std::make_unique<httplib::Server>();
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    std::string why;
    if (healthy(why)) {
      res.set_content("ok\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content(why + "\n", "text/plain");
    }
  });
  // dcgm-exporter's probe: 200 "OK" while it has metrics to serve, 503 "KO" when not (here:
  // when the latest reading is stale), no newline.
  server_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    std::string why;
    const bool ok = healthy(why);
    res.status = ok ? 200 : 503;
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(ok ? "OK" : "KO", "text/plain");
  });
  server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("gpuorch exporter: /metrics (Prometheus), /health, /healthz\n", "text/plain");
  });
  // Each open connection holds a worker: slow or silent ones must not keep a scrape waiting.
  const int port = harden_and_bind(*server_, options_.address, options_.port);
  if (port < 0) {
    base::fail_input(fmt::format("--listen {}:{}: cannot bind (in use, or not an address here)",
                                 options_.address, options_.port));
  }
  // The first page is rendered before serving, so no scrape ever sees an empty exporter.
  {
    const Round r = sampler_->sample();
    ExporterHealth h;
    for (const auto& s : r.gpus) h.gpu_errors += s.ok ? 0 : 1;
    h.rounds = 1;
    auto page = std::make_shared<const std::string>(render_metrics(host_, r, h, render_options()));
    const std::lock_guard lock(mutex_);
    rounds_ = 1;
    gpu_errors_ = h.gpu_errors;
    page_ = std::move(page);
    page_time_ = std::chrono::steady_clock::now();
  }
  sample_thread_ = std::thread([this] { sample_loop(); });
  serve_thread_ = std::thread([this] { server_->listen_after_bind(); });
  return port;
}

void Exporter::stop() {
  {
    const std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (server_) server_->stop();
  if (serve_thread_.joinable()) serve_thread_.join();
  if (sample_thread_.joinable()) sample_thread_.join();
}

void Exporter::sample_loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (wake_.wait_for(lock, options_.interval, [this] { return stopping_; })) return;
    }
    const Round r = sampler_->sample();
    ExporterHealth h;
    {
      const std::lock_guard lock(mutex_);
      h.rounds = rounds_ + 1;
      h.gpu_errors = gpu_errors_;
    }
    for (const auto& s : r.gpus) h.gpu_errors += s.ok ? 0 : 1;
    // Rendered outside the lock: a scrape waits at most for a pointer swap.
    auto page = std::make_shared<const std::string>(render_metrics(host_, r, h, render_options()));
    const std::lock_guard lock(mutex_);
    rounds_ = h.rounds;
    gpu_errors_ = h.gpu_errors;
    page_ = std::move(page);
    page_time_ = std::chrono::steady_clock::now();
  }
}

RenderOptions Exporter::render_options() const {
  RenderOptions o = options_.render;
  if (options_.pods) o.pods = options_.pods();
  return o;
}

std::string Exporter::metrics() const {
  std::shared_ptr<const std::string> page;
  std::chrono::steady_clock::time_point at;
  {
    const std::lock_guard lock(mutex_);
    page = page_;
    at = page_time_;
  }
  const double age = std::chrono::duration<double>(std::chrono::steady_clock::now() - at).count();
  return (page ? *page : std::string{}) + render_sample_age(age);
}

bool Exporter::healthy(std::string& why) const {
  std::chrono::steady_clock::time_point at;
  {
    const std::lock_guard lock(mutex_);
    at = page_time_;
  }
  const auto age = std::chrono::steady_clock::now() - at;
  // Three missed rounds (and at least five seconds) mean the sampler is stuck on a GPU.
  const auto limit =
      std::max<std::chrono::steady_clock::duration>(3 * options_.interval, std::chrono::seconds(5));
  if (age <= limit) return true;
  why = fmt::format("stale: latest GPU reading {:.1f} s old",
                    std::chrono::duration<double>(age).count());
  return false;
}

}  // namespace gpuorch::telemetry

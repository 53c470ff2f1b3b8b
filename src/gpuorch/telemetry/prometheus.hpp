#pragma once
// The Prometheus text format (version 0.0.4) for a Host and its latest Round. Metrics DCGM's
// exporter also has keep its names and labels (gpu, UUID, pci_bus_id, device, modelName,
// Hostname) so existing dashboards work; gpuorch_* adds topology and health.
#include <cstdint>
#include <string>

#include "gpuorch/telemetry/dcgm_fields.hpp"
#include "gpuorch/telemetry/pods.hpp"
#include "gpuorch/telemetry/sampler.hpp"
#include "gpuorch/topology/host.hpp"

namespace gpuorch::telemetry {

struct ExporterHealth {
  std::uint64_t rounds = 0;
  std::uint64_t gpu_errors = 0;  // cumulative failed GPU readings
};

// What the DCGM-named part of a page shows: the counters file's fields, and whose pods hold
// which GPU (empty without --kubernetes).
struct RenderOptions {
  std::vector<Collector> collectors = default_collectors();
  PodAssignments pods;
  bool pods_by_device_name = false;  // --kubernetes-gpu-id-type device-name: "nvidia0"
};

std::string render_metrics(const topology::Host& host, const Round& round,
                           const ExporterHealth& health, const RenderOptions& options = {});
// The one family computed at scrape time, appended after the pre-rendered rest.
std::string render_sample_age(double seconds);
// Escapes a label value (backslash, double quote, newline).
std::string escape_label(const std::string& value);

}  // namespace gpuorch::telemetry

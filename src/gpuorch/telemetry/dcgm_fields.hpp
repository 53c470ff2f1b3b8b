#pragma once
// DCGM's field names as dcgm-exporter exports them, and which of them gpuorch gives from NVML.
// dcgm-exporter's counters file (`-f/--collectors`) names fields, a Prometheus type and a help
// text per line; gpuorch reads the same file (collectors.hpp) and looks each name up here.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuorch/telemetry/sampler.hpp"

namespace gpuorch::telemetry {

struct DcgmField {
  std::string_view name;  // "DCGM_FI_DEV_GPU_UTIL"
  // What dcgm-exporter 4.8.3's etc/default-counters.csv says for it (or, for fields only older
  // files list, the file that lists them): the type and help a scrape shows by default.
  std::string_view type, help;
  // The reading that gives it; null when NVML cannot (see `why_not`).
  std::optional<double> GpuSample::*value = nullptr;
  std::string_view why_not;  // one line, for the start-up note and docs/telemetry.md
  // Also exported per MIG instance, from this reading of it (the memory fields); null: not.
  std::optional<double> MigSample::*mig_value = nullptr;
};

// Every DCGM field gpuorch knows by name.
const std::vector<DcgmField>& dcgm_fields();
const DcgmField* find_dcgm_field(std::string_view name);

// One line of a counters file: what to export, under which type and help.
struct Collector {
  const DcgmField* field = nullptr;
  std::string type;  // "gauge", "counter" or "label"
  std::string help;
};

// dcgm-exporter's default counters (4.8.3's etc/default-counters.csv, uncommented lines, in
// its order), used when no `-f` file is given.
std::vector<Collector> default_collectors();

}  // namespace gpuorch::telemetry

#pragma once
// dcgm-exporter's counters file (`-f/--collectors`): one field a line, "FIELD, TYPE, HELP";
// lines starting with '#' and blank lines are skipped. gpuorch exports exactly the fields a file
// lists, under the file's type and help, as dcgm-exporter does.
#include <string>
#include <vector>

#include "gpuorch/telemetry/dcgm_fields.hpp"

namespace gpuorch::telemetry {

// Throws base::InputError "FILE:LINE: problem" for a line that is not FIELD, TYPE, HELP, a field
// gpuorch does not know, or a type other than gauge, counter or label.
std::vector<Collector> parse_collectors(const std::string& text, const std::string& file);
std::vector<Collector> read_collectors(const std::string& path);

}  // namespace gpuorch::telemetry

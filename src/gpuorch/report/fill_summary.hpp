#pragma once
// Aggregates over seeds of fill runs, grouped by policy (what tables and plots show).
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/sim/fill.hpp"

namespace gpuorch::report {

struct PolicySummary {
  std::string policy;
  std::vector<const sim::FillRun*> runs;
  sim::Curve alloc_mean, alloc_min, alloc_max;
  sim::Curve frag_amount_mean, frag_ratio_mean;
  double failed_pods_mean = 0;
  double elapsed_s_mean = 0;
};

// Policies in the order of their first run.
std::vector<PolicySummary> summarize(const std::vector<sim::FillRun>& runs);

}  // namespace gpuorch::report

#pragma once
// The HTML report of fill runs: plots made by gnuplot (allocation and fragmentation against the
// arrived workload, one line per policy, the min-max band over seeds) and the summary table.
#include <string>
#include <vector>

#include "gpuorch/report/fill_output.hpp"
#include "gpuorch/report/fill_summary.hpp"
#include "gpuorch/report/html_page.hpp"
#include "gpuorch/sim/fill.hpp"

namespace gpuorch::report {

// Writes DIR/index.html with its SVG plots and the data and gnuplot script that made them.
// The folder appears complete or not at all (built aside, then renamed into place).
void write_fill_html(const std::string& dir, const FillMeta& meta, const RunHeader& header,
                     const std::vector<sim::FillRun>& runs);

// The plot data (curves.dat: one block per policy, `x mean min max frag_amount frag_ratio`) and
// the gnuplot script that draws it.
std::string fill_curve_data(const std::vector<PolicySummary>& summaries);
std::string fill_plot_script(const std::vector<PolicySummary>& summaries);

}  // namespace gpuorch::report

#include "gpuorch/report/fill_summary.hpp"

#include <algorithm>

namespace gpuorch::report {
namespace {

void aggregate(const std::vector<const sim::FillRun*>& runs, sim::Curve sim::FillCurves::*member,
               sim::Curve* mean, sim::Curve* lo, sim::Curve* hi) {
  for (int x = 0; x < sim::kCurvePoints; ++x) {
    const auto i = static_cast<std::size_t>(x);
    double sum = 0;
    std::size_t n = 0;
    std::optional<double> mn, mx;
    for (const sim::FillRun* r : runs) {
      const auto& v = (r->curves.*member)[i];
      if (!v) continue;
      sum += *v;
      ++n;
      mn = mn ? std::min(*mn, *v) : *v;
      mx = mx ? std::max(*mx, *v) : *v;
    }
    if (n == 0) continue;
    (*mean)[i] = sum / static_cast<double>(n);
    if (lo != nullptr) (*lo)[i] = mn;
    if (hi != nullptr) (*hi)[i] = mx;
  }
}

}  // namespace

std::vector<PolicySummary> summarize(const std::vector<sim::FillRun>& runs) {
  std::vector<PolicySummary> out;
  for (const auto& r : runs) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const PolicySummary& s) { return s.policy == r.policy; });
    if (it == out.end()) {
      out.push_back(PolicySummary{});
      out.back().policy = r.policy;
      it = out.end() - 1;
    }
    it->runs.push_back(&r);
  }
  for (auto& s : out) {
    aggregate(s.runs, &sim::FillCurves::alloc, &s.alloc_mean, &s.alloc_min, &s.alloc_max);
    aggregate(s.runs, &sim::FillCurves::frag_amount, &s.frag_amount_mean, nullptr, nullptr);
    aggregate(s.runs, &sim::FillCurves::frag_ratio, &s.frag_ratio_mean, nullptr, nullptr);
    for (const auto* r : s.runs) {
      s.failed_pods_mean += static_cast<double>(r->failed_pods);
      s.elapsed_s_mean += r->elapsed_s;
    }
    s.failed_pods_mean /= static_cast<double>(s.runs.size());
    s.elapsed_s_mean /= static_cast<double>(s.runs.size());
  }
  return out;
}

}  // namespace gpuorch::report

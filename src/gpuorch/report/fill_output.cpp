#include "gpuorch/report/fill_output.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "gpuorch/base/csv.hpp"
#include "gpuorch/report/fill_summary.hpp"
#include "gpuorch/sched/framework/filter_registry.hpp"
#include "gpuorch/sched/policy.hpp"

namespace gpuorch::report {
namespace {

nlohmann::json curve_json(const sim::Curve& curve) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : curve) out.push_back(v ? nlohmann::json(*v) : nlohmann::json(nullptr));
  return out;
}

std::string kind_key(int kind) {
  if (kind < 0) return "cpu-only";
  if (kind == 0) return "share";
  return fmt::format("{}-gpu", kind);
}

// The mean over a policy's seeds of one number per run.
template <typename Field>
double mean_over_runs(const PolicySummary& s, Field field) {
  double sum = 0;
  for (const auto* r : s.runs) sum += static_cast<double>(field(*r));
  return s.runs.empty() ? 0.0 : sum / static_cast<double>(s.runs.size());
}

std::string cell(const std::optional<double>& v, int width) {
  return v ? fmt::format("{:>{}.2f}", *v, width) : fmt::format("{:>{}}", "-", width);
}

}  // namespace

nlohmann::json fill_json(const FillMeta& meta, const std::vector<sim::FillRun>& runs) {
  nlohmann::json out;
  out["workload"] = meta.workload;
  out["nodes_source"] = meta.nodes;
  out["pods_source"] = meta.pods;
  out["synthetic"] = meta.synthetic;
  out["tune"] = meta.tune;
  out["nodes"] = meta.node_count;
  out["gpus"] = meta.gpu_count;
  out["trace_pods"] = meta.trace_pods;
  out["consolidate"] = meta.consolidate;
  out["runs"] = nlohmann::json::array();
  for (const auto& r : runs) {
    nlohmann::json j;
    j["policy"] = r.policy;
    j["seed"] = r.seed;
    j["alloc"] = curve_json(r.curves.alloc);
    j["frag_amount"] = curve_json(r.curves.frag_amount);
    j["frag_ratio"] = curve_json(r.curves.frag_ratio);
    j["arrived_pods"] = r.arrived_pods;
    j["failed_pods"] = r.failed_pods;
    j["infeasible_pods"] = r.infeasible_pods;
    nlohmann::json failures = nlohmann::json::object();
    for (std::size_t i = 1; i <= sched::filter_count(); ++i) {
      if (r.failed_by_reason[i] > 0) {
        failures[std::string(sched::filter_name(sched::FilterId(static_cast<std::uint8_t>(i))))] =
            r.failed_by_reason[i];
      }
    }
    j["failures"] = failures;
    nlohmann::json by_kind = nlohmann::json::object();
    for (const auto& [kind, t] : r.failed_by_kind) {
      by_kind[kind_key(kind)] = {{"pods", t.pods}, {"gpu_milli", t.gpu_milli}};
    }
    j["failed_by_kind"] = by_kind;
    j["failed_with_gpu_room"] = r.failed_with_gpu_room;
    j["failed_with_free_gpu"] = r.failed_with_free_gpu;
    j["rescued_pods"] = r.rescued_pods;
    j["moved_pods"] = r.moved_pods;
    j["arrived_gpu_milli"] = r.arrived_gpu_milli;
    j["used_gpu_milli"] = r.used_gpu_milli;
    j["gpu_milli_capacity"] = r.gpu_milli_capacity;
    j["idle_gpu_milli_by_free"] = r.idle_gpu_milli_by_free;
    j["elapsed_s"] = r.elapsed_s;
    out["runs"].push_back(std::move(j));
  }
  return out;
}

std::string fill_table(const FillMeta& meta, const std::vector<sim::FillRun>& runs) {
  std::string out;
  out += fmt::format(
      "workload {}{}: {} nodes, {} GPUs, {} pods in the trace, tuned to {:.0f}% "
      "of GPU capacity\n",
      meta.workload, meta.synthetic ? " (SYNTHETIC, openb-like)" : "", meta.node_count,
      meta.gpu_count, meta.trace_pods, meta.tune * 100);
  const auto summaries = summarize(runs);
  out += fmt::format(
      "\nGPU allocation (% of capacity, mean over seeds) at arrived workload x % "
      "of capacity\n");
  std::size_t width = 16;
  for (const auto& s : summaries) width = std::max(width, s.policy.size() + 2);
  out += fmt::format("{:<{}}{:>6}{:>8}{:>8}{:>8}{:>8}{:>8}{:>11}{:>11}{:>9}\n", "policy", width,
                     "seeds", "x=90", "x=100", "x=110", "x=120", "x=130", "frag@130", "fragr@130",
                     "failed");
  for (const auto& s : summaries) {
    out += fmt::format("{:<{}}{:>6}", s.policy, width, s.runs.size());
    for (const int x : {90, 100, 110, 120, 130})
      out += cell(s.alloc_mean[static_cast<std::size_t>(x)], 8);
    out += cell(s.frag_amount_mean[130], 11);
    out += cell(s.frag_ratio_mean[130], 11);
    out += fmt::format("{:>9.0f}\n", s.failed_pods_mean);
  }
  out +=
      "\nfrag@130: fragmented GPU as % of capacity; fragr@130: as % of idle GPU; failed: pods "
      "never placed (mean)\n";
  if (meta.consolidate > 0) {
    out += fmt::format(
        "\nConsolidation: a pod that fits no node may move up to {} bound pod{} to other nodes "
        "(mean over seeds)\n",
        meta.consolidate, meta.consolidate == 1 ? "" : "s");
    for (const auto& s : summaries) {
      out += fmt::format("  {:<{}}{:.0f} pods placed by moving {:.0f} others\n", s.policy, width,
                         mean_over_runs(s, [](const sim::FillRun& r) { return r.rescued_pods; }),
                         mean_over_runs(s, [](const sim::FillRun& r) { return r.moved_pods; }));
    }
  }
  out += "\nFailed pods by main reason (mean over seeds)\n";
  for (const auto& s : summaries) {
    std::vector<std::string> parts;
    for (std::size_t i = 1; i <= sched::filter_count(); ++i) {
      const double mean =
          mean_over_runs(s, [i](const sim::FillRun& r) { return r.failed_by_reason[i]; });
      if (mean > 0) {
        parts.push_back(fmt::format(
            "{} {:.0f}", sched::filter_name(sched::FilterId(static_cast<std::uint8_t>(i))), mean));
      }
    }
    out += fmt::format("  {:<{}}{}\n", s.policy, width,
                       parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", ")));
  }
  out += "\nFailed pods by kind (mean over seeds; their GPU demand in % of capacity)\n";
  for (const auto& s : summaries) {
    std::map<int, std::pair<double, double>> sum;  // kind -> (pods, GPU milli)
    for (const auto* r : s.runs) {
      for (const auto& [kind, t] : r->failed_by_kind) {
        sum[kind].first += static_cast<double>(t.pods);
        sum[kind].second += static_cast<double>(t.gpu_milli);
      }
    }
    std::vector<std::string> parts;
    const auto n = static_cast<double>(s.runs.size());
    // Every run of a summary is on the same cluster; a kind appears only when some run failed.
    for (const auto& [kind, v] : sum) {
      const auto capacity = static_cast<double>(s.runs.front()->gpu_milli_capacity);
      parts.push_back(fmt::format("{} {:.0f} ({:.2f}%)", kind_key(kind), v.first / n,
                                  capacity > 0 ? 100.0 * v.second / n / capacity : 0.0));
    }
    out += fmt::format("  {:<{}}{}\n", s.policy, width,
                       parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", ")));
  }
  out +=
      "\nSingle-GPU pods failed although a GPU had room: CPU, memory or model stopped them "
      "(mean over seeds)\n";
  for (const auto& s : summaries) {
    out += fmt::format(
        "  {:<{}}{:.1f}, {:.1f} of them with a GPU entirely free\n", s.policy, width,
        mean_over_runs(s, [](const sim::FillRun& r) { return r.failed_with_gpu_room; }),
        mean_over_runs(s, [](const sim::FillRun& r) { return r.failed_with_free_gpu; }));
  }
  out += "\nIdle GPUs at the end by free milli per GPU (mean over seeds, in GPUs)\n";
  out += fmt::format("  {:<{}}", "policy", width);
  for (int b = 0; b < 10; ++b)
    out += fmt::format("{:>8}", fmt::format("{}-{}", b * 100 + (b == 0), b * 100 + 99));
  out += fmt::format("{:>8}\n", "whole");
  for (const auto& s : summaries) {
    out += fmt::format("  {:<{}}", s.policy, width);
    for (std::size_t b = 0; b < 11; ++b) {
      const double milli =
          mean_over_runs(s, [b](const sim::FillRun& r) { return r.idle_gpu_milli_by_free[b]; });
      out += fmt::format("{:>8.1f}", milli / 1000.0);
    }
    out += "\n";
  }
  return out;
}

std::string fill_csv(const std::vector<sim::FillRun>& runs) {
  std::string out = "policy,seed,x,alloc,frag_amount,frag_ratio\n";
  auto num = [](const std::optional<double>& v) {
    return v ? fmt::format("{}", *v) : std::string();
  };
  for (const auto& r : runs) {
    for (int x = 0; x < sim::kCurvePoints; ++x) {
      const auto i = static_cast<std::size_t>(x);
      out += fmt::format("{},{},{},{},{},{}\n", r.policy, r.seed, x, num(r.curves.alloc[i]),
                         num(r.curves.frag_amount[i]), num(r.curves.frag_ratio[i]));
    }
  }
  return out;
}

}  // namespace gpuorch::report

namespace gpuorch::report {

std::string fill_placements_csv(const sim::FillInput& input,
                                const std::vector<sim::FillRun>& runs) {
  std::string out = "seed,policy,pod,node,gpus\n";
  for (const sim::FillRun& r : runs) {
    for (const sim::FillPlacement& p : r.placements) {
      const std::string node =
          p.node < 0 ? std::string() : input.nodes[static_cast<std::size_t>(p.node)].name;
      out += fmt::format("{},{},{},{},{}\n", r.seed, base::csv_field(r.policy),
                         base::csv_field(input.pods[p.pod].name), base::csv_field(node),
                         fmt::join(p.gpus, ";"));
    }
  }
  return out;
}

}  // namespace gpuorch::report

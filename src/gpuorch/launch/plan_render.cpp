#include "gpuorch/launch/plan_render.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpuorch::launch {
namespace {

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string cpus_cell(const RankBinding& b) {
  return b.cpus.empty() ? "(unbound)" : topology::format_id_list(b.cpus);
}

std::string nic_cell(const RankBinding& b) {
  return b.nic.empty() ? "-" : fmt::format("{} ({})", b.nic, b.nic_path);
}

}  // namespace

std::string render_plan_table(const Plan& plan) {
  const std::vector<std::string> header{"LOCAL_RANK", "GPU", "DEVICE",  "NUMA", "CPUS",
                                        "CORES",      "OMP", "MEMBIND", "NIC"};
  std::vector<std::vector<std::string>> rows;
  for (const auto& b : plan.ranks) {
    rows.push_back({std::to_string(b.local_rank), b.gpu >= 0 ? std::to_string(b.gpu) : "-",
                    b.gpu >= 0 ? std::to_string(b.device_index) : "-",
                    b.numa_node >= 0 ? std::to_string(b.numa_node) : "-", cpus_cell(b),
                    std::to_string(b.cores), std::to_string(b.omp_threads),
                    b.bind_memory ? std::to_string(b.numa_node) : "-", nic_cell(b)});
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      s += c + 1 < cells.size() ? fmt::format("{:<{}}  ", cells[c], width[c]) : cells[c];
    }
    return s + "\n";
  };
  std::string out = fmt::format("launch plan: host {}, {} local ranks, bind {}, backend {}\n",
                                or_dash(plan.hostname), plan.ranks.size(), to_string(plan.bind),
                                to_string(plan.backend));
  out += line(header);
  for (const auto& r : rows) out += line(r);
  if (!plan.ranks.empty()) {
    std::string env;
    for (const auto& [k, v] : plan.rank_env(0)) {
      if (k == "GPUORCH_GPU" || k == "NCCL_IB_HCA" || k == "GPUORCH_NUMA_NODE") continue;
      // Per rank with --virtual-local-rank (the GPU column).
      if (plan.own_gpu_only && (k == "CUDA_VISIBLE_DEVICES" || k == "ROCR_VISIBLE_DEVICES")) {
        continue;
      }
      env += fmt::format(" {}={}", k, v);
    }
    out += fmt::format("env (every rank):{}\n", env);
    if (plan.own_gpu_only) {
      out += "virtual local rank: each rank sees only its GPU, as device 0, with LOCAL_RANK=0\n";
    }
  }
  for (const auto& n : plan.notes) out += fmt::format("note: {}\n", n);
  return out;
}

nlohmann::ordered_json plan_json(const Plan& plan) {
  nlohmann::ordered_json j;
  j["schema"] = kPlanSchema;
  j["hostname"] = plan.hostname;
  j["bind"] = to_string(plan.bind);
  j["backend"] = to_string(plan.backend);
  j["torch_backend"] = torch_backend(plan.backend);
  j["ranks"] = nlohmann::ordered_json::array();
  for (const auto& b : plan.ranks) {
    nlohmann::ordered_json r;
    r["local_rank"] = b.local_rank;
    r["gpu"] = b.gpu >= 0 ? nlohmann::ordered_json(b.gpu) : nlohmann::ordered_json(nullptr);
    r["numa_node"] =
        b.numa_node >= 0 ? nlohmann::ordered_json(b.numa_node) : nlohmann::ordered_json(nullptr);
    r["cpus"] = topology::format_id_list(b.cpus);
    r["cores"] = b.cores;
    r["omp_num_threads"] = b.omp_threads;
    r["membind"] =
        b.bind_memory ? nlohmann::ordered_json(b.numa_node) : nlohmann::ordered_json(nullptr);
    r["nic"] = b.nic.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(b.nic);
    r["nic_path"] =
        b.nic.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(b.nic_path);
    nlohmann::ordered_json env = nlohmann::ordered_json::object();
    for (const auto& [k, v] : plan.rank_env(b.local_rank)) env[k] = v;
    r["env"] = env;
    j["ranks"].push_back(r);
  }
  j["notes"] = plan.notes;
  return j;
}

}  // namespace gpuorch::launch

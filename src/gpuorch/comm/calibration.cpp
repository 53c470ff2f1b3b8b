#include "gpuorch/comm/calibration.hpp"

#include <stdexcept>

namespace gpuorch::comm {

std::string path_type(topology::Path p) {
  switch (p) {
    case topology::Path::kNvLink:
      return "nvlink";
    case topology::Path::kXgmi:
      return "xgmi";
    case topology::Path::kPix:
    case topology::Path::kPxb:
    case topology::Path::kPhb:
      return "pcie";
    case topology::Path::kNode:
      return "same_numa";
    case topology::Path::kSys:
      return "cross_socket";
    case topology::Path::kSelf:
      break;
  }
  return "self";
}

Figures figures_from_bench(const nlohmann::json& bench) {
  const auto& results = bench.at("results");
  if (!results.is_array() || results.empty()) throw std::runtime_error("no results");
  Figures f;
  for (const auto& r : results) {
    const auto& o = r.at("out_of_place");
    f.points.push_back({r.at("size_bytes").get<std::size_t>(), o.at("busbw_gbps").get<double>(),
                        o.at("time_us").get<double>()});
  }
  const auto& first = results.front();
  const auto& last = results.back();
  f.latency_at = first.at("size_bytes").get<std::size_t>();
  f.latency_us = first.at("out_of_place").at("time_us").get<double>();
  f.bandwidth_at = last.at("size_bytes").get<std::size_t>();
  f.bandwidth_gbps = last.at("out_of_place").at("busbw_gbps").get<double>();
  return f;
}

namespace {
nlohmann::ordered_json figures_json(const Figures& f) {
  return {{"bandwidth_gbps", f.bandwidth_gbps},
          {"bandwidth_at_bytes", f.bandwidth_at},
          {"latency_us", f.latency_us},
          {"latency_at_bytes", f.latency_at},
          {"points", f.points}};
}
}  // namespace

nlohmann::ordered_json calibration_json(const CalibrationMeta& meta,
                                        const std::vector<PathFigures>& paths,
                                        const std::vector<CollectiveFigures>& collectives) {
  nlohmann::ordered_json j;
  j["schema"] = "gpuorch.calibration/1";
  j["host"] = meta.host;
  j["library"] = meta.library;
  j["measured_utc"] = meta.measured_utc;
  j["command"] = meta.command;
  j["env"] = {{"NCCL_NVLS_ENABLE", "0"}};
  auto& p = j["paths"] = nlohmann::ordered_json::array();
  for (const auto& x : paths) {
    nlohmann::ordered_json e{{"type", x.type}, {"link", x.link}, {"gpus", {x.gpu_a, x.gpu_b}}};
    e["method"] = "sendrecv between the two GPUs (gpuorch bench sendrecv -g 2)";
    e["forced_by"] = x.forced_by;
    e.update(figures_json(x.figures));
    p.push_back(std::move(e));
  }
  auto& c = j["collectives"] = nlohmann::ordered_json::array();
  for (const auto& x : collectives) {
    nlohmann::ordered_json e{{"collective", x.collective}, {"ranks", x.ranks}};
    e.update(figures_json(x.figures));
    if (!x.settings.empty()) {
      auto& ss = e["settings"] = nlohmann::ordered_json::array();
      for (const auto& curve : x.settings) {
        ss.push_back({{"setting", curve.setting.name()},
                      {"NCCL_ALGO", curve.setting.algo},
                      {"NCCL_PROTO", curve.setting.proto},
                      {"points", curve.points}});
      }
    }
    c.push_back(std::move(e));
  }
  return j;
}

}  // namespace gpuorch::comm

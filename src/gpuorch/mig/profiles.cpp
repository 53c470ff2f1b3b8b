#include "gpuorch/mig/profiles.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace gpuorch::mig {
namespace {

// Every MIG GPU of the Ampere/Hopper generation has the same seven instance shapes (profile IDs
// 19, 20, 15, 14, 9, 5, 0 in `nvidia-smi mig -lgipp`); only the memory in the names differs.
// `mem` lists the GB in the name of the 1g, 1g double-memory, 2g, 3g/4g and 7g shapes.
GpuModel make_model(std::string name, int g1, int g1x2, int g2, int g34, int g7) {
  GpuModel m;
  m.name = std::move(name);
  m.profiles = {
      {fmt::format("1g.{}gb", g1), 19, 1, 1, {0, 1, 2, 3, 4, 5, 6}, 7},
      {fmt::format("1g.{}gb+me", g1), 20, 1, 1, {0, 1, 2, 3, 4, 5, 6}, 1},
      {fmt::format("1g.{}gb", g1x2), 15, 1, 2, {0, 2, 4, 6}, 4},
      {fmt::format("2g.{}gb", g2), 14, 2, 2, {0, 2, 4}, 3},
      {fmt::format("3g.{}gb", g34), 9, 3, 4, {0, 4}, 2},
      {fmt::format("4g.{}gb", g34), 5, 4, 4, {0}, 1},
      {fmt::format("7g.{}gb", g7), 0, 7, 8, {0}, 1},
  };
  return m;
}

}  // namespace

const Profile* GpuModel::profile(std::string_view wanted) const {
  for (const auto& p : profiles) {
    if (p.name == wanted) return &p;
  }
  return nullptr;
}

const std::vector<GpuModel>& models() {
  // H200's placements are inferred from the shared GH100 profile IDs (reference §3.2: no lgipp
  // dump was seen); the A100-40GB 1g double-memory profile is 1g.10gb.
  static const std::vector<GpuModel> all = {
      make_model("A100-40GB", 5, 10, 10, 20, 40),    make_model("A100-80GB", 10, 20, 20, 40, 80),
      make_model("H100-80GB", 10, 20, 20, 40, 80),   make_model("H100-94GB", 12, 24, 24, 47, 94),
      make_model("H200-141GB", 18, 35, 35, 71, 141),
  };
  return all;
}

const GpuModel* model(std::string_view name) {
  for (const auto& m : models()) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

const GpuModel* model_for_gpu(std::string_view marketing_name, long long memory_mib) {
  const auto has = [&](std::string_view s) {
    return marketing_name.find(s) != std::string_view::npos;
  };
  // Memory decides between the variants of one chip; names alone are not reliable
  // ("NVIDIA H100 NVL" is the 94 GB part, "NVIDIA H200" carries no size at all).
  const double gib = static_cast<double>(memory_mib) / 1024.0;
  if (has("A100")) {
    if (has("80GB") || gib > 60) return model("A100-80GB");
    return model("A100-40GB");
  }
  if (has("H200")) return model("H200-141GB");
  if (has("H100")) {
    if (has("94GB") || has("NVL") || (gib > 85 && gib < 100)) return model("H100-94GB");
    return model("H100-80GB");
  }
  return nullptr;
}

std::string mixed_resource_name(std::string_view profile) {
  std::string name(profile);
  std::replace(name.begin(), name.end(), '+', '.');
  return "nvidia.com/mig-" + name;
}

}  // namespace gpuorch::mig

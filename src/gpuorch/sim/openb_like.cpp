// The embedded default workload: a SYNTHETIC cluster and pod list that follow the openb trace's
// published composition, so `gpuorch sim fill` runs anywhere without downloads. The tables are
// statistics of the public trace (regenerate with scripts/derive-openb-mix.py); the pods are
// drawn i.i.d. from the shape mix, so they are not the trace itself.
#include "gpuorch/sim/openb_like.hpp"

#include <fmt/format.h>

#include <array>

#include "gpuorch/base/rng.hpp"

namespace gpuorch::sim {
namespace {

struct NodeShape {
  const char* model;
  int gpus;
  std::int64_t cpu_milli;
  std::int64_t memory_mib;
  int count;
};

struct PodShape {
  std::int64_t cpu_milli;
  int gpu_count;
  std::int64_t gpu_milli;
  std::int64_t memory_mib;
  int pods;
};

constexpr std::array kNodeShapes{
    NodeShape{"A10", 1, 128000, 1048576, 2},    NodeShape{"G2", 8, 96000, 393216, 549},
    NodeShape{"G3", 8, 128000, 786432, 39},     NodeShape{"P100", 1, 8000, 61440, 3},
    NodeShape{"P100", 2, 8000, 61440, 2},       NodeShape{"P100", 2, 16000, 122880, 107},
    NodeShape{"P100", 2, 64000, 262144, 22},    NodeShape{"T4", 2, 104000, 524288, 387},
    NodeShape{"T4", 4, 96000, 393216, 17},      NodeShape{"V100M16", 1, 8000, 32768, 19},
    NodeShape{"V100M16", 4, 32000, 131072, 28}, NodeShape{"V100M16", 8, 64000, 262144, 7},
    NodeShape{"V100M16", 8, 82000, 344064, 1},  NodeShape{"V100M32", 4, 48000, 376832, 9},
    NodeShape{"V100M32", 8, 96000, 786432, 21},
};

constexpr std::array kPodShapes{
    PodShape{3152, 1, 810, 5600, 1047},   PodShape{11300, 1, 1000, 49152, 874},
    PodShape{11400, 1, 1000, 48128, 599}, PodShape{3152, 1, 1000, 5600, 470},
    PodShape{11908, 1, 470, 47104, 388},  PodShape{12500, 0, 0, 57344, 366},
    PodShape{8000, 1, 470, 30517, 360},   PodShape{12000, 1, 1000, 24576, 326},
    PodShape{32000, 0, 0, 49152, 290},    PodShape{18708, 1, 1000, 64512, 255},
    PodShape{11908, 1, 650, 47104, 237},  PodShape{4000, 1, 320, 22888, 232},
    PodShape{9810, 1, 1000, 41560, 195},  PodShape{8000, 0, 0, 30517, 185},
    PodShape{8000, 1, 1000, 16384, 164},  PodShape{4000, 1, 1000, 24576, 159},
    PodShape{15700, 1, 1000, 58368, 158}, PodShape{11908, 1, 1000, 47104, 153},
    PodShape{16000, 1, 1000, 32768, 150}, PodShape{4000, 1, 230, 30517, 122},
    PodShape{6000, 1, 460, 10240, 120},   PodShape{15400, 0, 0, 51200, 120},
    PodShape{16500, 0, 0, 51200, 95},     PodShape{14200, 1, 1000, 58368, 93},
    PodShape{24200, 1, 1000, 93184, 84},  PodShape{3152, 1, 590, 5600, 75},
    PodShape{4152, 1, 550, 10600, 72},    PodShape{8000, 1, 320, 30517, 72},
    PodShape{11900, 1, 1000, 77824, 55},  PodShape{4000, 1, 160, 15258, 54},
    PodShape{4152, 1, 370, 10600, 45},    PodShape{4000, 1, 220, 15258, 43},
    PodShape{8200, 1, 1000, 33792, 41},   PodShape{15200, 1, 1000, 80896, 36},
    PodShape{4152, 1, 810, 10600, 31},    PodShape{16400, 1, 1000, 125952, 29},
    PodShape{1000, 1, 320, 2048, 22},     PodShape{6000, 1, 160, 22888, 20},
    PodShape{8000, 1, 220, 30517, 19},    PodShape{4000, 1, 110, 22888, 18},
    PodShape{4000, 1, 480, 22888, 18},    PodShape{8000, 1, 230, 30517, 18},
    PodShape{64200, 8, 1000, 263168, 18}, PodShape{88000, 8, 1000, 327680, 18},
    PodShape{1000, 1, 1000, 6144, 15},    PodShape{16000, 0, 0, 31250, 14},
    PodShape{8000, 1, 650, 30517, 12},    PodShape{7000, 1, 1000, 30000, 11},
    PodShape{11400, 0, 0, 57344, 11},     PodShape{15400, 1, 1000, 90112, 9},
    PodShape{32200, 4, 1000, 132096, 9},  PodShape{2000, 1, 1000, 16384, 8},
    PodShape{6000, 1, 1000, 32768, 8},    PodShape{14900, 1, 1000, 73728, 8},
    PodShape{4000, 1, 330, 22888, 7},     PodShape{16200, 2, 1000, 66560, 7},
    PodShape{4000, 1, 350, 22888, 6},     PodShape{9400, 1, 1000, 52224, 6},
    PodShape{12000, 1, 460, 18432, 6},    PodShape{4152, 1, 270, 10600, 4},
    PodShape{6000, 1, 50, 22888, 4},      PodShape{6000, 1, 110, 22888, 4},
    PodShape{12000, 0, 0, 24576, 4},      PodShape{4000, 1, 50, 15258, 3},
    PodShape{6000, 2, 1000, 65536, 3},    PodShape{30200, 2, 1000, 160768, 3},
    PodShape{32000, 4, 1000, 131072, 3},  PodShape{60200, 4, 1000, 320512, 3},
    PodShape{64000, 8, 1000, 262144, 3},  PodShape{120000, 8, 1000, 737280, 3},
    PodShape{1000, 1, 650, 2048, 2},      PodShape{2000, 1, 370, 8192, 2},
    PodShape{4000, 1, 470, 15258, 2},     PodShape{4000, 1, 650, 15258, 2},
    PodShape{6000, 1, 320, 30517, 2},     PodShape{8000, 1, 110, 30517, 2},
    PodShape{8000, 1, 440, 30517, 2},     PodShape{8000, 1, 460, 16000, 2},
    PodShape{17400, 2, 1000, 43008, 2},   PodShape{20000, 0, 0, 65536, 2},
    PodShape{120200, 8, 1000, 640000, 2}, PodShape{1000, 1, 140, 2048, 1},
    PodShape{1000, 1, 290, 2048, 1},      PodShape{5000, 1, 1000, 10240, 1},
    PodShape{8000, 1, 480, 30517, 1},     PodShape{8710, 1, 1000, 41560, 1},
    PodShape{10000, 0, 0, 48828, 1},      PodShape{11800, 1, 1000, 78848, 1},
    PodShape{14000, 1, 1000, 0, 1},       PodShape{14000, 2, 1000, 60000, 1},
    PodShape{15900, 1, 1000, 90112, 1},
};

}  // namespace

std::vector<cluster::NodeSpec> openb_like_nodes() {
  std::vector<cluster::NodeSpec> nodes;
  for (const NodeShape& s : kNodeShapes) {
    for (int i = 0; i < s.count; ++i) {
      cluster::NodeSpec n;
      n.name = fmt::format("synthetic-{}x{}-{}c-{:04d}", s.model, s.gpus, s.cpu_milli / 1000, i);
      n.cpu_milli = s.cpu_milli;
      n.memory_mib = s.memory_mib;
      n.gpu_count = s.gpus;
      n.gpu_model = s.model;
      n.labels.emplace_back("gpu-model", s.model);
      n.labels.emplace_back("gpuorch.io/synthetic", "true");
      nodes.push_back(std::move(n));
    }
  }
  return nodes;
}

std::vector<workload::PodSpec> openb_like_pods(std::uint64_t seed, std::size_t count) {
  std::int64_t total = 0;
  for (const PodShape& s : kPodShapes) total += s.pods;
  if (count == 0) count = static_cast<std::size_t>(total);
  base::Rng rng(seed);
  std::vector<workload::PodSpec> pods;
  pods.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    auto draw = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(total)));
    const PodShape* shape = &kPodShapes.back();
    for (const PodShape& s : kPodShapes) {
      if (draw < s.pods) {
        shape = &s;
        break;
      }
      draw -= s.pods;
    }
    workload::PodSpec p;
    p.name = fmt::format("synthetic-pod-{:05d}", i);
    p.cpu_milli = shape->cpu_milli;
    p.memory_mib = shape->memory_mib;
    p.gpu_count = shape->gpu_count;
    p.gpu_milli = shape->gpu_milli;
    pods.push_back(std::move(p));
  }
  return pods;
}

}  // namespace gpuorch::sim

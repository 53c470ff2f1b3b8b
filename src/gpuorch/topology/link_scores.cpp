#include "gpuorch/topology/link_scores.hpp"

#include <algorithm>

namespace gpuorch::topology {
namespace {

// The classes of the scale (link_scores.hpp): PCIe/CPU paths in steps of 5 (scores 10 .. 50, the
// values of the older scale, so old inventories read alike), every NVLink/xGMI pair above them.
int link_class(const Link* l) {
  if (l == nullptr) return 0;
  switch (l->path) {
    case Path::kNvLink:
      return kNvLinkClassBase + std::clamp(l->nvlinks, 1, kMaxScoredNvLinks);
    case Path::kXgmi:
      // KFD weights grow with hops (15 inside an MI250 package, 30 across): fewer is better.
      return kNvLinkClassBase + (l->xgmi_weight > 0 ? std::max(1, 60 / l->xgmi_weight) : 1);
    case Path::kPix:
      return 25;
    case Path::kPxb:
      return 20;
    case Path::kPhb:
      return 15;
    case Path::kNode:
      return 10;
    case Path::kSys:
    case Path::kSelf:
      return 5;
  }
  return 0;
}

}  // namespace

std::uint8_t gpu_link_score(const Host& h, std::size_t a, std::size_t b) {
  if (a == b) return 0;
  const int na = a < h.gpus.size() ? h.gpus[a].numa_node : -1;
  const int nb = b < h.gpus.size() ? h.gpus[b].numa_node : -1;
  const int same_numa = na >= 0 && na == nb ? 1 : 0;
  return static_cast<std::uint8_t>(2 * link_class(h.link(a, b)) + same_numa);
}

std::vector<std::uint8_t> gpu_link_scores(const Host& h) {
  const std::size_t n = h.gpus.size();
  std::vector<std::uint8_t> m(n * n, 0);
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) m[a * n + b] = gpu_link_score(h, a, b);
  }
  return m;
}

}  // namespace gpuorch::topology

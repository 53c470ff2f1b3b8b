#include "gpuorch/topology/path.hpp"

#include "gpuorch/topology/host.hpp"

namespace gpuorch::topology {

std::string to_string(Path p, int nvlinks) {
  switch (p) {
    case Path::kSelf:
      return "X";
    case Path::kNvLink:
      return "NV" + std::to_string(nvlinks);
    case Path::kXgmi:
      return "XGMI";
    case Path::kPix:
      return "PIX";
    case Path::kPxb:
      return "PXB";
    case Path::kPhb:
      return "PHB";
    case Path::kNode:
      return "NODE";
    case Path::kSys:
      return "SYS";
  }
  return "SYS";
}

Path pcie_path(const PciLocation& a, int numa_a, const PciLocation& b, int numa_b) {
  const bool same_numa = numa_a >= 0 && numa_a == numa_b;
  if (!a.known || !b.known || a.host_bridge.empty() || a.host_bridge != b.host_bridge) {
    return same_numa ? Path::kNode : Path::kSys;
  }
  std::size_t common = 0;
  while (common < a.bridges.size() && common < b.bridges.size() &&
         a.bridges[common] == b.bridges[common]) {
    ++common;
  }
  if (common == 0) return Path::kPhb;
  // Below the bridge where both meet, each side passes at most the switch's downstream port for
  // PIX; anything deeper is another switch level.
  const std::size_t below_a = a.bridges.size() - common;
  const std::size_t below_b = b.bridges.size() - common;
  return below_a <= 1 && below_b <= 1 ? Path::kPix : Path::kPxb;
}

}  // namespace gpuorch::topology

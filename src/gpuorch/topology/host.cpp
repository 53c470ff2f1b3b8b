#include "gpuorch/topology/host.hpp"

namespace gpuorch::topology {

const char* to_string(Vendor v) { return v == Vendor::kNvidia ? "nvidia" : "amd"; }

std::string Host::device_name(std::size_t i) const {
  if (i < gpus.size()) return "GPU" + std::to_string(i);
  return "NIC" + std::to_string(i - gpus.size());
}

const Link* Host::link(std::size_t a, std::size_t b) const {
  if (a > b) std::swap(a, b);
  for (const auto& l : links) {
    if (static_cast<std::size_t>(l.a) == a && static_cast<std::size_t>(l.b) == b) return &l;
  }
  return nullptr;
}

}  // namespace gpuorch::topology

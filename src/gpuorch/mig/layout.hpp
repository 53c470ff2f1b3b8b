#pragma once
// Where MIG GPU instances sit on one GPU. A GPU instance occupies the memory slices
// [start, start + size) (NVML's nvmlGpuInstancePlacement_t); a layout is valid when every
// instance starts at one of its profile's allowed starts, no two overlap, no profile exceeds its
// instance limit and the SM slices add up to at most 7. Creation order matters on real GPUs, so
// `best_layout` chooses the placements that leave the most room for what comes next.
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/mig/profiles.hpp"

namespace gpuorch::mig {

struct Placement {
  std::string profile;
  int start = 0;
  bool operator==(const Placement&) const = default;
};
using Layout = std::vector<Placement>;

// Why `layout` cannot exist on `model` (one line), or nothing when it is valid.
std::optional<std::string> check(const GpuModel& model, const Layout& layout);

// How much a layout leaves for later: the number of (profile, start) placements that could
// still be added to it one at a time. A full GPU leaves 0; an empty one every placement.
int room(const GpuModel& model, const Layout& layout);
// Memory slices no instance occupies.
int free_memory_slices(const GpuModel& model, const Layout& layout);

struct FitResult {
  std::optional<Layout> layout;  // `fixed` plus the new instances, by start
  std::string reason;            // why not, when there is no layout
};

// Places `profiles` (names, any order) next to the instances already in `fixed`, choosing among
// all valid placements the one with the most room (ties: earliest starts). Unknown profiles,
// an invalid `fixed` and sets that do not fit give a reason instead.
FitResult best_layout(const GpuModel& model, const std::vector<std::string>& profiles,
                      const Layout& fixed = {});
// Whether `profiles` fit on an empty GPU of `model` in some order.
inline bool fits(const std::vector<std::string>& profiles, const GpuModel& model) {
  return best_layout(model, profiles).layout.has_value();
}

// "3g.40gb@0 2g.20gb@4 1g.10gb@6"
std::string to_string(const Layout& layout);

}  // namespace gpuorch::mig

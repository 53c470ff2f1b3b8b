#include "gpuorch/mig/layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

namespace gpuorch::mig {
namespace {

// What one more instance needs from the GPU's current state.
struct Occupancy {
  std::array<bool, kMemorySlices> used{};
  int compute = 0;
  std::map<std::string, int> count;

  [[nodiscard]] bool admits(const Profile& p, int start) const {
    if (std::find(p.starts.begin(), p.starts.end(), start) == p.starts.end()) return false;
    if (start + p.memory_slices > kMemorySlices) return false;
    if (compute + p.compute_slices > kComputeSlices) return false;
    if (auto it = count.find(p.name); it != count.end() && it->second >= p.max_instances) {
      return false;
    }
    for (int s = start; s < start + p.memory_slices; ++s) {
      if (used[static_cast<std::size_t>(s)]) return false;
    }
    return true;
  }
  void add(const Profile& p, int start, int delta) {
    for (int s = start; s < start + p.memory_slices; ++s)
      used[static_cast<std::size_t>(s)] = delta > 0;
    compute += delta * p.compute_slices;
    count[p.name] += delta;
  }
};

std::string starts_text(const Profile& p) {
  std::string s;
  for (int v : p.starts) s += (s.empty() ? "" : ", ") + std::to_string(v);
  return s;
}

int room_of(const GpuModel& model, const Occupancy& occ) {
  int n = 0;
  for (const auto& p : model.profiles) {
    for (int start : p.starts) n += occ.admits(p, start) ? 1 : 0;
  }
  return n;
}

// Builds the occupancy of a layout, or says why the layout is impossible.
std::optional<std::string> occupy(const GpuModel& model, const Layout& layout, Occupancy& occ) {
  for (const auto& pl : layout) {
    const Profile* p = model.profile(pl.profile);
    if (!p) return fmt::format("{} has no MIG profile {}", model.name, pl.profile);
    if (std::find(p->starts.begin(), p->starts.end(), pl.start) == p->starts.end()) {
      return fmt::format("{} cannot start at memory slice {} (allowed: {})", p->name, pl.start,
                         starts_text(*p));
    }
    for (const auto& other : layout) {
      if (&other == &pl) break;
      const Profile* q = model.profile(other.profile);
      if (q && pl.start < other.start + q->memory_slices &&
          other.start < pl.start + p->memory_slices) {
        return fmt::format("{}@{} overlaps {}@{} (memory slices {}-{} and {}-{})", p->name,
                           pl.start, q->name, other.start, pl.start,
                           pl.start + p->memory_slices - 1, other.start,
                           other.start + q->memory_slices - 1);
      }
    }
    if (occ.count[p->name] >= p->max_instances) {
      return fmt::format("more than {} instance{} of {}", p->max_instances,
                         p->max_instances == 1 ? "" : "s", p->name);
    }
    if (occ.compute + p->compute_slices > kComputeSlices) {
      return fmt::format("{} SM slices needed, the GPU has {}", occ.compute + p->compute_slices,
                         kComputeSlices);
    }
    occ.add(*p, pl.start, +1);
  }
  return std::nullopt;
}

struct Search {
  const GpuModel& model;
  std::vector<const Profile*> todo;  // largest first; equal profiles adjacent
  Occupancy occ;
  Layout chosen;
  std::optional<Layout> best;
  int best_room = -1;

  void run(std::size_t i, int min_start) {
    if (i == todo.size()) {
      const int r = room_of(model, occ);
      // Strictly greater: the first layout found (earliest starts) wins a tie.
      if (r > best_room) {
        best_room = r;
        best = chosen;
      }
      return;
    }
    const Profile& p = *todo[i];
    for (int start : p.starts) {
      if (start < min_start || !occ.admits(p, start)) continue;
      occ.add(p, start, +1);
      chosen.push_back({p.name, start});
      // Equal profiles are interchangeable: taking their starts in increasing order visits each
      // set of positions once.
      const bool same_next = i + 1 < todo.size() && todo[i + 1] == &p;
      run(i + 1, same_next ? start + 1 : 0);
      chosen.pop_back();
      occ.add(p, start, -1);
    }
  }
};

}  // namespace

std::optional<std::string> check(const GpuModel& model, const Layout& layout) {
  Occupancy occ;
  return occupy(model, layout, occ);
}

int room(const GpuModel& model, const Layout& layout) {
  Occupancy occ;
  if (occupy(model, layout, occ)) return 0;
  return room_of(model, occ);
}

int free_memory_slices(const GpuModel& model, const Layout& layout) {
  Occupancy occ;
  occupy(model, layout, occ);
  return static_cast<int>(std::count(occ.used.begin(), occ.used.end(), false));
}

FitResult best_layout(const GpuModel& model, const std::vector<std::string>& profiles,
                      const Layout& fixed) {
  FitResult result;
  Search search{model, {}, {}, fixed, std::nullopt, -1};
  if (auto why = occupy(model, fixed, search.occ)) {
    result.reason = *why;
    return result;
  }
  for (const auto& name : profiles) {
    const Profile* p = model.profile(name);
    if (!p) {
      result.reason = fmt::format("{} has no MIG profile {}", model.name, name);
      return result;
    }
    search.todo.push_back(p);
  }
  std::stable_sort(search.todo.begin(), search.todo.end(), [](const Profile* a, const Profile* b) {
    if (a->memory_slices != b->memory_slices) return a->memory_slices > b->memory_slices;
    return a->name < b->name;
  });
  search.run(0, 0);
  if (!search.best) {
    std::string wanted;
    for (const auto& n : profiles) wanted += (wanted.empty() ? "" : " + ") + n;
    result.reason = fmt::format("{} does not fit on {}{}", wanted.empty() ? "nothing" : wanted,
                                model.name, fixed.empty() ? "" : " next to " + to_string(fixed));
    return result;
  }
  std::sort(search.best->begin(), search.best->end(),
            [](const Placement& a, const Placement& b) { return a.start < b.start; });
  result.layout = std::move(search.best);
  return result;
}

std::string to_string(const Layout& layout) {
  std::string s;
  for (const auto& p : layout)
    s += fmt::format("{}{}@{}", s.empty() ? "" : " ", p.profile, p.start);
  return s;
}

}  // namespace gpuorch::mig

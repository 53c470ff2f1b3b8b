#include "gpuorch/k8s/mirror/device_assignment.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace gpuorch::k8s {
namespace {

// A backtracking search is bounded: a pathological request gives up rather than hang the
// scheduler (its node then has no valid set).
constexpr long long kSearchSteps = 200000;

class Search {
 public:
  Search(std::span<const int> devices, const std::vector<RequestSlot>& slots,
         const std::vector<SlotConstraint>& limits, const AttributeOf& attribute_of)
      : devices_(devices), slots_(slots), limits_(limits), attribute_of_(attribute_of) {
    left_.resize(slots.size());
    for (std::size_t s = 0; s < slots.size(); ++s) {
      left_[s] = slots[s].all ? static_cast<int>(slots[s].eligible.size()) : slots[s].count;
    }
    of_slot_.resize(slots.size());
    for (std::size_t c = 0; c < limits.size(); ++c) {
      for (const std::size_t s : limits[c].slots) {
        if (s < slots.size()) of_slot_[s].push_back(c);
      }
    }
    matched_.resize(limits.size());
    used_.resize(limits.size());
    chosen_.resize(devices.size());
  }

  std::optional<std::vector<std::size_t>> run() {
    long long capacity = 0;
    for (const int l : left_) capacity += l;
    if (capacity != static_cast<long long>(devices_.size())) return std::nullopt;
    // Every device of an All request must be among those given out.
    for (const RequestSlot& s : slots_) {
      if (!s.all) continue;
      for (const int d : s.eligible) {
        if (std::find(devices_.begin(), devices_.end(), d) == devices_.end()) return std::nullopt;
      }
    }
    if (!place(0)) return std::nullopt;
    return chosen_;
  }

 private:
  bool place(std::size_t i) {
    if (i == devices_.size()) return true;
    if (++steps_ > kSearchSteps) return false;
    const int d = devices_[i];
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      if (left_[s] == 0 ||
          !std::binary_search(slots_[s].eligible.begin(), slots_[s].eligible.end(), d)) {
        continue;
      }
      std::vector<std::pair<std::size_t, std::string>> applied;
      if (!admit(s, d, applied)) {
        undo(applied);
        continue;
      }
      --left_[s];
      chosen_[i] = s;
      if (place(i + 1)) return true;
      ++left_[s];
      undo(applied);
      if (steps_ > kSearchSteps) return false;
    }
    return false;
  }

  // Whether device `d` in slot `s` keeps every constraint on `s`; what it recorded is in `applied`.
  bool admit(std::size_t s, int d, std::vector<std::pair<std::size_t, std::string>>& applied) {
    for (const std::size_t c : of_slot_[s]) {
      const auto v = attribute_of_(d, limits_[c].attribute);
      if (!v) return false;
      if (limits_[c].distinct) {
        if (used_[c].contains(*v)) return false;
      } else if (!matched_[c].empty() && matched_[c].begin()->first != *v) {
        return false;
      }
      if (limits_[c].distinct) {
        used_[c].insert(*v);
      } else {
        ++matched_[c][*v];
      }
      applied.emplace_back(c, *v);
    }
    return true;
  }

  void undo(const std::vector<std::pair<std::size_t, std::string>>& applied) {
    for (const auto& [c, v] : applied) {
      if (limits_[c].distinct) {
        used_[c].erase(v);
      } else if (--matched_[c][v] == 0) {
        matched_[c].erase(v);
      }
    }
  }

  std::span<const int> devices_;
  const std::vector<RequestSlot>& slots_;
  const std::vector<SlotConstraint>& limits_;
  const AttributeOf& attribute_of_;
  std::vector<int> left_;
  std::vector<std::vector<std::size_t>> of_slot_;
  std::vector<std::map<std::string, int>> matched_;  // matchAttribute: the one value, counted
  std::vector<std::set<std::string>> used_;          // distinctAttribute: the values taken
  std::vector<std::size_t> chosen_;
  long long steps_ = 0;
};

}  // namespace

std::optional<std::vector<std::size_t>> assign_devices(std::span<const int> devices,
                                                       const std::vector<RequestSlot>& slots,
                                                       const std::vector<SlotConstraint>& limits,
                                                       const AttributeOf& attribute_of) {
  return Search(devices, slots, limits, attribute_of).run();
}

ValidUnions valid_unions(const std::vector<RequestSlot>& slots,
                         const std::vector<SlotConstraint>& limits,
                         const AttributeOf& attribute_of) {
  ValidUnions out;
  // All requests fix their devices; ExactCount ones choose among the rest.
  std::set<int> fixed;
  int k = 0;
  for (const RequestSlot& s : slots) {
    if (!s.all) {
      k += s.count;
      continue;
    }
    if (s.eligible.empty()) return out;  // All needs at least one device on the node
    for (const int d : s.eligible) {
      if (!fixed.insert(d).second) return out;  // two All requests would share a device
    }
  }
  std::set<int> pool;
  for (const RequestSlot& s : slots) {
    if (s.all) continue;
    for (const int d : s.eligible) {
      if (!fixed.contains(d)) pool.insert(d);
    }
  }
  const std::vector<int> candidates(pool.begin(), pool.end());
  const auto n = static_cast<int>(candidates.size());
  if (k > n) return out;
  std::vector<int> pick(static_cast<std::size_t>(k));
  for (int i = 0; i < k; ++i) pick[static_cast<std::size_t>(i)] = i;
  long long examined = 0;
  while (true) {
    if (++examined > kUnionsExamined || out.sets.size() >= kUnionsKept) {
      out.truncated = true;
      break;
    }
    std::vector<int> set(fixed.begin(), fixed.end());
    for (const int i : pick) set.push_back(candidates[static_cast<std::size_t>(i)]);
    std::sort(set.begin(), set.end());
    if (!set.empty() && assign_devices(set, slots, limits, attribute_of)) {
      out.sets.push_back(std::move(set));
    }
    // The next k-combination of the candidates, lexicographically.
    int i = k - 1;
    while (i >= 0 && pick[static_cast<std::size_t>(i)] == n - k + i) --i;
    if (i < 0) break;
    ++pick[static_cast<std::size_t>(i)];
    for (int j = i + 1; j < k; ++j) {
      pick[static_cast<std::size_t>(j)] = pick[static_cast<std::size_t>(j - 1)] + 1;
    }
  }
  return out;
}

}  // namespace gpuorch::k8s

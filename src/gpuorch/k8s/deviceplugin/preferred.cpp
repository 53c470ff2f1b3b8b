#include "gpuorch/k8s/deviceplugin/preferred.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>

#include "gpuorch/sched/gpu_picker.hpp"
#include "gpuorch/topology/link_scores.hpp"

namespace gpuorch::k8s {
namespace {

// Two devices' link score: topology::gpu_link_scores of their GPUs, the one scale the scheduler
// core and the launcher use too; two MIG devices of one GPU score above any two GPUs, so a
// container's MIG devices stay on one GPU.
class GpuScores {
 public:
  static constexpr int kSameGpu = 2 * (topology::kMaxGpuLinkScore / 2 + 1);
  static_assert(kSameGpu > topology::kMaxGpuLinkScore);

  explicit GpuScores(const topology::Host& host)
      : n_(host.gpus.size()), scores_(topology::gpu_link_scores(host)) {}

  int operator()(const PhysicalDevice& a, const PhysicalDevice& b) const {
    if (a.gpu == b.gpu) return kSameGpu;
    return scores_.at(static_cast<std::size_t>(a.gpu) * n_ + static_cast<std::size_t>(b.gpu));
  }

 private:
  std::size_t n_;
  std::vector<std::uint8_t> scores_;
};

struct Candidate {
  std::string id;
  const PhysicalDevice* dev = nullptr;
};

std::vector<Candidate> lookup(const Resource& r, const std::vector<std::string>& ids) {
  std::vector<Candidate> out;
  for (const auto& id : ids) {
    const PhysicalDevice* d = find_physical(r, id);
    if (!d) {
      throw std::invalid_argument(fmt::format(
          "invalid preferred allocation request for '{}': unknown device: {}", r.name, id));
    }
    if (std::none_of(out.begin(), out.end(), [&](const Candidate& c) { return c.id == id; })) {
      out.push_back({id, d});
    }
  }
  return out;
}

// Replicas: fill from the GPUs with the most replicas still free (the least shared), the
// "distributed" policy of NVIDIA's plugin; ties go to the best-connected GPU, then the first.
std::vector<std::string> distributed(const GpuScores& scores, const Resource& r,
                                     const std::vector<Candidate>& avail,
                                     std::vector<std::string> chosen, int size) {
  std::map<const PhysicalDevice*, int> free_replicas, taken;
  for (const auto& c : avail) ++free_replicas[c.dev];
  for (const auto& id : chosen) ++taken[find_physical(r, id)];
  while (static_cast<int>(chosen.size()) < size) {
    const Candidate* best = nullptr;
    std::tuple<int, int, int> best_key{};
    for (const auto& c : avail) {
      if (std::find(chosen.begin(), chosen.end(), c.id) != chosen.end()) continue;
      int link = 0;
      for (const auto& [dev, n] : taken) {
        if (n > 0 && dev != c.dev) link += scores(*c.dev, *dev);
      }
      // Fewer replicas already given to this container, more still free, better connected.
      const std::tuple<int, int, int> key{-taken[c.dev], free_replicas[c.dev], link};
      if (!best || key > best_key) {
        best = &c;
        best_key = key;
      }
    }
    if (!best) break;
    chosen.push_back(best->id);
    ++taken[best->dev];
    --free_replicas[best->dev];
  }
  return chosen;
}

}  // namespace

std::vector<std::string> preferred_allocation(const topology::Host& host, const Resource& r,
                                              const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include,
                                              int size) {
  const auto avail = lookup(r, available);
  const auto must = lookup(r, must_include);
  if (size < static_cast<int>(must.size())) {
    throw std::invalid_argument(
        fmt::format("preferred allocation of {} {} cannot include the {} required devices", size,
                    r.name, must.size()));
  }
  if (size > static_cast<int>(avail.size())) {
    throw std::invalid_argument(fmt::format("preferred allocation of {} {}: only {} available",
                                            size, r.name, avail.size()));
  }
  std::vector<std::string> chosen;
  for (const auto& m : must) chosen.push_back(m.id);
  const GpuScores scores(host);
  if (r.sharing != SharingKind::kNone) return distributed(scores, r, avail, chosen, size);

  // The scheduler core's picker over the offered devices and the required ones that are not
  // offered (allocated already): all of them in one link-score matrix, must_include fixed.
  std::vector<Candidate> devices = avail;
  for (const auto& m : must) {
    if (std::none_of(devices.begin(), devices.end(),
                     [&](const Candidate& c) { return c.id == m.id; })) {
      devices.push_back(m);
    }
  }
  const std::size_t n = devices.size();
  std::vector<int> links(n * n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      if (i != j) links[i * n + j] = scores(*devices[i].dev, *devices[j].dev);
    }
  }
  std::vector<int> offered(avail.size()), fixed;
  for (std::size_t i = 0; i < avail.size(); ++i) offered[i] = static_cast<int>(i);
  for (const auto& m : must) {
    const auto it = std::find_if(devices.begin(), devices.end(),
                                 [&](const Candidate& c) { return c.id == m.id; });
    fixed.push_back(static_cast<int>(it - devices.begin()));
  }
  for (const int i : sched::pick_connected(n, links, offered, fixed, size)) {
    const std::string& id = devices[static_cast<std::size_t>(i)].id;
    if (std::find(chosen.begin(), chosen.end(), id) == chosen.end()) chosen.push_back(id);
  }
  return chosen;
}

}  // namespace gpuorch::k8s

#include "gpuorch/k8s/deviceplugin/scheduled_allocation.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpuorch/k8s/api/api_path.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

std::string annotation(const json& pod, const char* key) {
  const json& a = pod.value("metadata", json::object()).value("annotations", json::object());
  const auto it = a.find(key);
  return it != a.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The physical device of `r` that is recorded GPU `gpu` as a whole (MIG devices are not what a
// scheduler records); -1 when this resource has none.
int physical_of(const Resource& r, int gpu) {
  for (std::size_t i = 0; i < r.physical.size(); ++i) {
    if (r.physical[i].gpu == gpu && r.physical[i].mig < 0) return static_cast<int>(i);
  }
  return -1;
}

// An advertised ID of physical device `p`: one of `prefer` when there is one not taken yet,
// else (allow_any) the first advertised one; empty when none.
std::string advertised_for(const Resource& r, int p, const std::vector<std::string>& prefer,
                           std::vector<std::string>& taken, bool allow_any) {
  for (const auto& id : prefer) {
    const PhysicalDevice* d = find_physical(r, id);
    if (d != nullptr && d == &r.physical[static_cast<std::size_t>(p)] &&
        std::find(taken.begin(), taken.end(), id) == taken.end()) {
      taken.push_back(id);
      return id;
    }
  }
  if (!allow_any) return {};
  for (const auto& d : r.devices) {
    if (d.physical == p) return d.id;
  }
  return {};
}

}  // namespace

ScheduledAllocations::ScheduledAllocations(ApiClient& api, std::string node_name,
                                           std::function<void(const std::string&)> log)
    : api_(api), node_(std::move(node_name)), log_(std::move(log)) {}

void ScheduledAllocations::log(const std::string& line) const {
  if (log_) log_(line);
}

std::vector<ScheduledChoice> ScheduledAllocations::waiting(const Resource& r, std::size_t size,
                                                           std::vector<json>* objects) {
  const json list = api_.get("/api/v1/pods?fieldSelector=spec.nodeName%3D" + percent_encode(node_));
  struct Candidate {
    std::string created;
    ScheduledChoice choice;
    json object;
  };
  std::vector<Candidate> found;
  for (const json& obj : list.value("items", json::array())) {
    const PodObject pod = pod_from_json(obj);
    if (pod.terminal() || pod.deleting || pod.gpus.size() != size) continue;
    if (!annotation(obj, kGpusAllocatedAnnotation).empty()) continue;
    ScheduledChoice c;
    c.pod = pod.key();
    c.gpus = pod.gpus;
    const std::string milli = annotation(obj, kGpuMilliAnnotation);
    if (!milli.empty()) {
      try {
        c.gpu_milli = std::clamp<std::int64_t>(std::stoll(milli), 0, 1000);
      } catch (const std::exception&) {
        continue;  // not what a gpuorch scheduler writes
      }
    }
    if (std::any_of(c.gpus.begin(), c.gpus.end(), [&](int g) { return physical_of(r, g) < 0; })) {
      continue;  // recorded GPUs this resource does not serve
    }
    found.push_back({pod.created, std::move(c), obj});
  }
  std::stable_sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.created, a.choice.pod) < std::tie(b.created, b.choice.pod);
  });
  std::vector<ScheduledChoice> out;
  for (auto& f : found) {
    out.push_back(std::move(f.choice));
    if (objects != nullptr) objects->push_back(std::move(f.object));
  }
  return out;
}

std::optional<ScheduledChoice> ScheduledAllocations::claim(
    const Resource& r, const std::vector<std::string>& requested) {
  const std::lock_guard lock(mutex_);
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::vector<json> objects;
    std::vector<ScheduledChoice> candidates;
    try {
      candidates = waiting(r, requested.size(), &objects);
    } catch (const std::exception& e) {
      log(fmt::format("cannot list the pods on {}: {}; the kubelet's devices stand", node_,
                      e.what()));
      return std::nullopt;
    }
    if (candidates.empty()) return std::nullopt;
    // The pod whose GPUs the kubelet asked for (it followed GetPreferredAllocation), else the
    // oldest waiting one.
    std::size_t pick = 0;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      std::vector<std::string> taken;
      const bool all =
          std::all_of(candidates[i].gpus.begin(), candidates[i].gpus.end(), [&](int g) {
            return !advertised_for(r, physical_of(r, g), requested, taken, false).empty();
          });
      if (all) {
        pick = i;
        break;
      }
    }
    ScheduledChoice c = candidates[pick];
    std::vector<std::string> taken;
    for (const int g : c.gpus) {
      c.device_ids.push_back(advertised_for(r, physical_of(r, g), requested, taken, true));
    }
    const json& meta = objects[pick]["metadata"];
    const json patch = {
        {"metadata",
         {{"resourceVersion", meta.value("resourceVersion", "")},
          {"annotations",
           {{kGpusAllocatedAnnotation, fmt::format("{}", fmt::join(c.device_ids, ","))}}}}}};
    try {
      api_.patch(pod_path(meta.value("namespace", ""), meta.value("name", "")), patch);
    } catch (const ApiError& e) {
      if (e.status() == 409 || e.status() == 404) continue;  // raced: look again
      log(fmt::format("cannot mark {} allocated: {}; the kubelet's devices stand", c.pod,
                      e.what()));
      return std::nullopt;
    }
    log(fmt::format("{}: {} GPU(s) {} as the scheduler recorded ({})", c.pod, r.name,
                    fmt::join(c.gpus, ","), fmt::join(c.device_ids, ",")));
    return c;
  }
  log(fmt::format("gave up claiming a pod on {} after 5 conflicting writes", node_));
  return std::nullopt;
}

std::optional<std::vector<std::string>> ScheduledAllocations::preferred(
    const Resource& r, const std::vector<std::string>& available, int size) {
  const std::lock_guard lock(mutex_);
  std::vector<ScheduledChoice> candidates;
  try {
    candidates = waiting(r, static_cast<std::size_t>(std::max(0, size)), nullptr);
  } catch (const std::exception& e) {
    log(fmt::format("cannot list the pods on {}: {}", node_, e.what()));
    return std::nullopt;
  }
  for (const auto& c : candidates) {
    std::vector<std::string> ids;
    std::vector<std::string> taken;
    for (const int g : c.gpus) {
      const std::string id = advertised_for(r, physical_of(r, g), available, taken, false);
      if (id.empty()) break;
      ids.push_back(id);
    }
    if (ids.size() == c.gpus.size()) return ids;
  }
  return std::nullopt;
}

void apply_scheduled_share(const topology::Host& host, const Resource& r,
                           const ScheduledChoice& choice, ContainerAllocation& a) {
  a.envs["GPUORCH_POD"] = choice.pod;
  if (choice.gpu_milli <= 0 || choice.gpu_milli >= 1000 || choice.gpus.empty()) return;
  a.envs["GPUORCH_GPU_MILLI"] = std::to_string(choice.gpu_milli);
  if (r.sharing != SharingKind::kMps) return;
  const int p = physical_of(r, choice.gpus.front());
  std::int64_t memory = p >= 0 ? r.physical[static_cast<std::size_t>(p)].memory_mib : 0;
  if (memory <= 0 && choice.gpus.front() < static_cast<int>(host.gpus.size())) {
    memory = host.gpus[static_cast<std::size_t>(choice.gpus.front())].memory_mib;
  }
  a.envs["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] =
      std::to_string(std::max<std::int64_t>(1, choice.gpu_milli / 10));
  if (memory > 0) {
    a.envs["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] =
        fmt::format("0={}M", memory * choice.gpu_milli / 1000);
  }
}

}  // namespace gpuorch::k8s

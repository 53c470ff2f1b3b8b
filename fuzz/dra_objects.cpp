// DRA objects as gpuorch scheduler reads them from the API server (k8s/mirror/dra_devices.hpp,
// dra_claims.hpp): each input line is a ResourceSlice, DeviceClass, ResourceClaim or Pod (a line
// starting with '-' deletes the slice), parsed as the watch does; after each line the pods seen
// are planned against everything seen, a plan's first choice is written as a claim status (its
// first GPUs) and released again. Only the parse may refuse (runtime_error), and writing an
// allocation for a device that is not published (runtime_error); reading, planning and
// releasing never throw, whatever the objects hold.
#include <map>
#include <set>
#include <stdexcept>
#include <string_view>

#include "fuzz_support.hpp"
#include "gpuorch/k8s/api/server_json.hpp"
#include "gpuorch/k8s/mirror/dra_claims.hpp"
#include "gpuorch/k8s/mirror/dra_devices.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"

namespace {

using Json = nlohmann::json;
using namespace gpuorch::k8s;

struct State {
  DraInventory inventory;
  std::map<std::string, DeviceClassObject> classes;
  std::map<std::string, ClaimObject> claims;
  std::vector<PodObject> pods;
};

void plan_all(State& s) {
  std::set<std::string> gpu_nodes;
  for (const auto& [name, node] : s.inventory.nodes()) {
    gpu_nodes.insert(name);
    for (const auto& [key, claim] : s.claims) (void)allocated_gpus(claim, s.inventory);
  }
  for (const PodObject& pod : s.pods) {
    const ClaimPlan plan = plan_claims(pod, s.claims, s.classes, s.inventory, gpu_nodes);
    if (plan.choices.empty() || plan.choices[0].groups.empty()) continue;
    const ClaimChoice& c = plan.choices[0];
    std::vector<int> gpus;
    for (const auto& group : c.groups[0].groups) {
      for (const int g : group) {
        if (static_cast<int>(gpus.size()) < c.gpus) gpus.push_back(g);
      }
    }
    for (const ClaimChoice::Part& part : c.parts) {
      const auto it = s.claims.find(part.claim);
      if (it == s.claims.end()) continue;
      try {
        const std::string& node = c.groups[0].node;
        const Json written =
            claim_status_for(it->second, pod, node, device_results(c, node, gpus, s.inventory),
                             c.parts, s.inventory);
        (void)claim_released(claim_from_json(written), pod.uid);
      } catch (const std::runtime_error&) {
      }
    }
  }
}

void read_line(State& s, std::string_view line) {
  const bool deleted = !line.empty() && line.front() == '-';
  if (deleted) line.remove_prefix(1);
  Json j;
  try {
    j = parse_server_json(line, "dra fuzz");
  } catch (const std::runtime_error&) {
    return;
  }
  if (!j.is_object()) return;
  const std::string kind = j.value("kind", Json()).is_string() ? j["kind"].get<std::string>() : "";
  if (kind == "ResourceSlice") {
    (void)s.inventory.update_slice(j, deleted);
  } else if (kind == "DeviceClass") {
    s.classes[object_name(j)] = device_class_from_json(j);
  } else if (kind == "ResourceClaim") {
    ClaimObject c = claim_from_json(j);
    s.claims[c.key()] = std::move(c);
  } else if (kind == "Pod" && s.pods.size() < 16) {
    s.pods.push_back(pod_from_json(j));
  }
  gpuorch::cluster::NodeSpec spec;
  for (const auto& [name, node] : s.inventory.nodes()) {
    spec.name = name;
    spec.gpu_count = 0;
    (void)s.inventory.apply(spec);
  }
  plan_all(s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = gpuorch::fuzz::text_of(data, size);
  State s;
  std::size_t start = 0;
  for (int lines = 0; start <= text.size() && lines < 64; ++lines) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    read_line(s, std::string_view(text).substr(start, end - start));
    start = end + 1;
  }
  return 0;
}

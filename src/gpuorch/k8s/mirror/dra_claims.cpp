#include "gpuorch/k8s/mirror/dra_claims.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "gpuorch/base/printable.hpp"
#include "gpuorch/k8s/api/object_fields.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

const json& array_of(const json& j) {
  static const json kEmpty = json::array();
  return j.is_array() ? j : kEmpty;
}

// One alternative of a request: an `exactly` request, or one of its `firstAvailable` ones.
struct DeviceAsk {
  std::string request;  // the result's request name
  std::string device_class;
  std::vector<std::string> selectors;
  bool all = false;
  int count = 1;
};

// Reads a request (or a subrequest); "" when it is inside what gpuorch evaluates, else why not.
std::string read_ask(const json& r, const std::string& name, DeviceAsk& out) {
  out.request = name;
  out.device_class = str(r, "deviceClassName");
  for (const json& s : array_of(field(r, "selectors"))) {
    const json& cel = field(field(s, "cel"), "expression");
    if (!cel.is_string()) return "a selector that is not a CEL expression";
    out.selectors.push_back(cel.get<std::string>());
  }
  const std::string mode = str(r, "allocationMode");
  if (mode == "All") {
    out.all = true;
  } else if (!mode.empty() && mode != "ExactCount") {
    return fmt::format("allocationMode '{}'", base::printable(mode));
  }
  if (const json& c = field(r, "count"); !c.is_null()) {
    if (!c.is_number_integer() || c.get<std::int64_t>() < 1 || c.get<std::int64_t>() > 1024) {
      return fmt::format("count {}", c.dump());
    }
    out.count = static_cast<int>(c.get<std::int64_t>());
  }
  if (field(r, "adminAccess").is_boolean() && field(r, "adminAccess").get<bool>()) {
    return "adminAccess";
  }
  if (!field(r, "capacity").is_null()) return "capacity requests (consumable capacity)";
  return "";
}

using Eligibility = DeviceEligibility;

// The value of `attribute` (qualified) as a group key; nullopt when the device lacks it.
std::optional<std::string> attribute_key(const DraDevice& d, const std::string& attribute) {
  const auto it = d.view.attributes.find(attribute);
  if (it == d.view.attributes.end()) return std::nullopt;
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return "s:" + v;
        } else if constexpr (std::is_same_v<T, SemVer>) {
          return fmt::format("v:{}.{}.{}", v.major, v.minor, v.patch);
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "b:1" : "b:0";
        } else {
          return fmt::format("i:{}", v);
        }
      },
      it->second);
}

Eligibility eligible_gpus(const std::vector<DeviceSelector>& class_selectors,
                          const std::vector<DeviceSelector>& selectors,
                          const std::vector<std::string>& match_attributes,
                          const DraInventory& inventory, const std::set<std::string>& gpu_nodes,
                          const std::string& pinned_node) {
  Eligibility out;
  for (const auto& [node, n] : inventory.nodes()) {
    if (!gpu_nodes.contains(node) || (!pinned_node.empty() && node != pinned_node)) continue;
    std::map<std::vector<std::string>, std::vector<int>> groups;
    for (const DraDevice& d : n.devices) {
      if (d.gpu < 0) continue;
      auto passes = [&](const std::vector<DeviceSelector>& all) {
        for (const DeviceSelector& s : all) {
          try {
            if (!s.matches(d.view)) return false;
          } catch (const SelectorError& e) {
            if (out.runtime_error.empty()) {
              out.runtime_error = fmt::format("`{}` on device {}: {}", s.text(), d.name, e.what());
            }
            return false;
          }
        }
        return true;
      };
      if (!passes(class_selectors)) continue;
      ++out.class_devices;
      if (!passes(selectors)) continue;
      ++out.eligible;
      std::vector<std::string> key;
      bool has_all = true;
      for (const std::string& a : match_attributes) {
        const auto v = attribute_key(d, a);
        if (!v) has_all = false;
        key.push_back(v.value_or(""));
      }
      if (has_all) groups[key].push_back(d.gpu);
    }
    if (groups.empty()) continue;
    workload::NodeGpuGroups g;
    g.node = node;
    for (auto& [key, gpus] : groups) {
      out.most_in_a_group = std::max(out.most_in_a_group, static_cast<int>(gpus.size()));
      std::sort(gpus.begin(), gpus.end());
      g.groups.push_back(std::move(gpus));
    }
    out.groups.push_back(std::move(g));
  }
  return out;
}

// kube-scheduler qualifies a matchAttribute without a domain with none; gpuorch's attributes are
// all published qualified or under the driver's domain, so the name is taken as written.
std::string qualified_attribute(const std::string& a) { return a; }

}  // namespace

ClaimObject claim_from_json(const json& claim) {
  ClaimObject c;
  c.object = claim;
  const json& meta = field(claim, "metadata");
  c.uid = str(meta, "uid");
  c.ns = str(meta, "namespace");
  c.name = str(meta, "name");
  for (const json& o : array_of(field(meta, "ownerReferences"))) c.owners.push_back(str(o, "uid"));
  const json& status = field(claim, "status");
  const json& allocation = field(status, "allocation");
  c.allocated = allocation.is_object();
  for (const json& term : array_of(field(field(allocation, "nodeSelector"), "nodeSelectorTerms"))) {
    for (const json& f : array_of(field(term, "matchFields"))) {
      const json& values = field(f, "values");
      if (str(f, "key") == "metadata.name" && str(f, "operator") == "In" && values.is_array() &&
          values.size() == 1 && values[0].is_string()) {
        c.node = values[0].get<std::string>();
      }
    }
  }
  for (const json& r : array_of(field(status, "reservedFor"))) {
    c.reserved_uids.push_back(str(r, "uid"));
  }
  return c;
}

std::vector<std::pair<std::string, int>> allocated_gpus(const ClaimObject& claim,
                                                        const DraInventory& inventory) {
  std::vector<std::pair<std::string, int>> out;
  const json& results =
      field(field(field(field(claim.object, "status"), "allocation"), "devices"), "results");
  for (const json& r : array_of(results)) {
    if (const auto at = inventory.gpu_of(str(r, "driver"), str(r, "pool"), str(r, "device"))) {
      if (std::find(out.begin(), out.end(), *at) == out.end()) out.push_back(*at);
    }
  }
  return out;
}

int requested_gpus(const ClaimObject& claim) {
  int total = 0;
  for (const json& r : array_of(field(field(field(claim.object, "spec"), "devices"), "requests"))) {
    const json* ask = &field(r, "exactly");
    if (!ask->is_object()) {
      const json& first = array_of(field(r, "firstAvailable"));
      if (first.empty()) continue;
      ask = &first[0];
    }
    DeviceAsk a;
    if (!read_ask(*ask, "", a).empty() || a.all) continue;
    total += a.count;
  }
  return std::min(total, 1024);
}

DeviceClassObject device_class_from_json(const json& cls) {
  DeviceClassObject c;
  const json& spec = field(cls, "spec");
  for (const json& s : array_of(field(spec, "selectors"))) {
    const json& cel = field(field(s, "cel"), "expression");
    // A selector of another kind than CEL is refused where it is used: kept as text no parser
    // takes.
    c.selectors.push_back(cel.is_string() ? cel.get<std::string>() : std::string("<not CEL>"));
  }
  c.config = array_of(field(spec, "config"));
  c.extended_resource_name = str(spec, "extendedResourceName");
  return c;
}

ClaimPlan plan_claims(const PodObject& pod, const std::map<std::string, ClaimObject>& claims,
                      const std::map<std::string, DeviceClassObject>& classes,
                      const DraInventory& inventory, const std::set<std::string>& gpu_nodes,
                      EligibilityCache* cache) {
  ClaimPlan plan;
  std::vector<const ClaimObject*> to_allocate;
  for (std::size_t i = 0; i < pod.claims.size(); ++i) {
    const PodClaim& pc = pod.claims[i];
    const std::string where = fmt::format("spec.resourceClaims[{}] ({})", i, pc.name);
    if (pc.claim.empty()) {
      if (pc.template_name.empty()) {
        plan.refused = fmt::format("{} names neither a claim nor a template", where);
      } else {
        plan.waiting = fmt::format(
            "{}: the ResourceClaim of template {} has not been made yet (kube-controller-manager's "
            "resourceclaim controller makes it); waiting for it",
            where, pc.template_name);
      }
      return plan;
    }
    const auto it = claims.find(pod.ns + "/" + pc.claim);
    if (it == claims.end()) {
      plan.waiting = fmt::format("{}: ResourceClaim {}/{} does not exist yet; waiting for it",
                                 where, pod.ns, pc.claim);
      return plan;
    }
    const ClaimObject& c = it->second;
    if (!pc.template_name.empty() &&
        std::find(c.owners.begin(), c.owners.end(), pod.uid) == c.owners.end()) {
      plan.waiting = fmt::format(
          "{}: ResourceClaim {} is not owned by the pod; waiting for its own", where, c.key());
      return plan;
    }
    plan.claims.push_back(c.key());
    if (c.allocated) {
      if (c.node.empty()) {
        plan.unevaluated = true;
        plan.refused = fmt::format(
            "ResourceClaim {} is allocated without a node (a network-attached device); gpuorch "
            "scheduler places only node-local devices",
            c.key());
        return plan;
      }
      if (!plan.pinned_node.empty() && plan.pinned_node != c.node) {
        plan.refused = fmt::format("the pod's claims are allocated on two nodes ({} and {})",
                                   plan.pinned_node, c.node);
        return plan;
      }
      plan.pinned_node = c.node;
    } else {
      to_allocate.push_back(&c);
    }
  }
  if (to_allocate.empty()) return plan;
  if (to_allocate.size() > 1) {
    plan.unevaluated = true;
    plan.refused = fmt::format(
        "{} unallocated ResourceClaims in one pod: gpuorch scheduler allocates one claim per pod "
        "so far (docs/dra.md)",
        to_allocate.size());
    return plan;
  }
  const ClaimObject& claim = *to_allocate.front();
  const std::string who = "ResourceClaim " + claim.key();
  const json& devices = field(field(claim.object, "spec"), "devices");
  const json& requests = field(devices, "requests");
  if (!requests.is_array() || requests.empty()) {
    plan.refused = fmt::format("{} asks for no device", who);
    return plan;
  }
  // Each request's alternatives (one for `exactly`, one per subrequest for `firstAvailable`).
  std::vector<std::vector<DeviceAsk>> asks;
  for (const json& r : requests) {
    const std::string name = str(r, "name");
    std::vector<DeviceAsk> alternatives;
    if (const json& exactly = field(r, "exactly"); exactly.is_object()) {
      DeviceAsk a;
      if (const std::string why = read_ask(exactly, name, a); !why.empty()) {
        plan.unevaluated = true;
        plan.refused =
            fmt::format("{} request {}: {} is not evaluated by gpuorch scheduler", who, name, why);
        return plan;
      }
      alternatives.push_back(std::move(a));
    } else if (const json& first = field(r, "firstAvailable"); first.is_array()) {
      for (const json& sub : first) {
        DeviceAsk a;
        const std::string sub_name = name + "/" + str(sub, "name");
        if (const std::string why = read_ask(sub, sub_name, a); !why.empty()) {
          plan.unevaluated = true;
          plan.refused = fmt::format("{} request {}: {} is not evaluated by gpuorch scheduler", who,
                                     sub_name, why);
          return plan;
        }
        alternatives.push_back(std::move(a));
      }
    }
    if (alternatives.empty()) {
      plan.refused = fmt::format("{} request {}: neither exactly nor firstAvailable", who, name);
      return plan;
    }
    asks.push_back(std::move(alternatives));
  }
  // Several requests are one ask when they ask for the same devices (class and selectors):
  // their counts add up and the results are handed out in request order.
  if (asks.size() > 1) {
    for (const auto& a : asks) {
      if (a.size() != 1 || a[0].all || a[0].device_class != asks[0][0].device_class ||
          a[0].selectors != asks[0][0].selectors) {
        plan.unevaluated = true;
        plan.refused = fmt::format(
            "{}: {} requests for different devices (or with firstAvailable or All) in one claim "
            "are not evaluated by gpuorch scheduler so far (docs/dra.md)",
            who, asks.size());
        return plan;
      }
    }
  }
  std::vector<std::string> match_attributes;
  for (const json& c : array_of(field(devices, "constraints"))) {
    if (!field(c, "distinctAttribute").is_null()) {
      plan.unevaluated = true;
      plan.refused = fmt::format(
          "{}: constraint distinctAttribute is not evaluated by gpuorch "
          "scheduler",
          who);
      return plan;
    }
    const std::string a = str(c, "matchAttribute");
    if (a.empty()) {
      plan.refused = fmt::format("{}: a constraint without matchAttribute", who);
      return plan;
    }
    // A constraint on some of the requests holds for all of them here: stricter, never wrong.
    match_attributes.push_back(qualified_attribute(a));
  }
  std::vector<std::string> reasons;
  // A class none of whose devices is a whole GPU of gpuorch's driver may be another driver's
  // (a NIC, MIG): what those devices are gpuorch does not model.
  bool no_gpu_of_class = false;
  for (const DeviceAsk& alternative : asks[0]) {
    const auto cls = classes.find(alternative.device_class);
    if (cls == classes.end()) {
      plan.waiting = fmt::format("{} request {}: DeviceClass {} does not exist; waiting for it",
                                 who, alternative.request, alternative.device_class);
      return plan;
    }
    std::vector<DeviceSelector> class_selectors, selectors;
    try {
      for (const auto& s : cls->second.selectors) {
        class_selectors.push_back(DeviceSelector::parse(s));
      }
      for (const auto& s : alternative.selectors) selectors.push_back(DeviceSelector::parse(s));
    } catch (const SelectorError& e) {
      // Which expression: the first one that does not parse.
      std::string expression;
      for (const auto* list : {&cls->second.selectors, &alternative.selectors}) {
        for (const auto& s : *list) {
          try {
            (void)DeviceSelector::parse(s);
          } catch (const SelectorError&) {
            if (expression.empty()) expression = s;
          }
        }
      }
      plan.unevaluated = true;
      plan.refused = fmt::format(
          "{} request {}: the selector `{}` is outside the CEL subset gpuorch scheduler "
          "evaluates ({}); it refuses the claim rather than guess (docs/dra.md, \"The CEL "
          "subset\")",
          who, alternative.request, base::printable(expression), e.what());
      return plan;
    }
    // What decides eligibility, as one key: the class's and the request's selectors, the
    // constrained attributes, the pinned node (unit separators never appear in a selector's
    // meaning: a selector holding one only misses the cache).
    const std::string key =
        fmt::format("{}\x1e{}\x1e{}\x1e{}", fmt::join(cls->second.selectors, "\x1f"),
                    fmt::join(alternative.selectors, "\x1f"), fmt::join(match_attributes, "\x1f"),
                    plan.pinned_node);
    const Eligibility* cached = nullptr;
    if (cache != nullptr) {
      if (const auto hit = cache->find(key); hit != cache->end()) cached = &hit->second;
    }
    Eligibility computed;
    if (cached == nullptr) {
      computed = eligible_gpus(class_selectors, selectors, match_attributes, inventory, gpu_nodes,
                               plan.pinned_node);
      if (cache != nullptr) {
        if (cache->size() >= 1024) cache->clear();  // bounded: distinct requests are few
        cached = &cache->emplace(key, std::move(computed)).first->second;
      } else {
        cached = &computed;
      }
    }
    const Eligibility& e = *cached;
    int total = alternative.count;
    if (asks.size() > 1) {
      total = 0;
      for (const auto& a : asks) total += a[0].count;
    }
    bool met = false;
    if (alternative.all) {
      // All: every eligible device of the node, so the count is the node's; one choice per
      // count, nodes whose eligible devices are not one group (a matchAttribute they break) out.
      std::map<int, std::vector<workload::NodeGpuGroups>> by_count;
      for (const auto& g : e.groups) {
        if (g.groups.size() != 1) continue;
        by_count[static_cast<int>(g.groups[0].size())].push_back(g);
      }
      for (auto& [count, groups] : by_count) {
        ClaimChoice choice;
        choice.gpus = count;
        choice.groups = std::move(groups);
        choice.parts.push_back({claim.key(), alternative.request, count, cls->second.config});
        plan.choices.push_back(std::move(choice));
        met = true;
      }
    } else if (e.most_in_a_group >= total) {
      ClaimChoice choice;
      choice.gpus = total;
      choice.groups = e.groups;
      if (asks.size() == 1) {
        choice.parts.push_back({claim.key(), alternative.request, total, cls->second.config});
      } else {
        for (const auto& a : asks) {
          choice.parts.push_back({claim.key(), a[0].request, a[0].count, cls->second.config});
        }
      }
      plan.choices.push_back(std::move(choice));
      met = true;
    }
    if (met) continue;
    // Why this alternative cannot be met on any node, even an empty one.
    std::string why;
    const std::string of_class = fmt::format("DeviceClass {}", alternative.device_class);
    if (e.class_devices == 0) {
      no_gpu_of_class = true;
      why = fmt::format(
          "no device of {} on any node (gpuorch scheduler allocates whole GPUs of {} on nodes "
          "that publish them in ResourceSlices)",
          of_class, kGpuDraDriver);
    } else if (e.eligible == 0) {
      why = fmt::format("the request's selectors exclude all {} devices of {}", e.class_devices,
                        of_class);
    } else if (alternative.all) {
      why = fmt::format("no node has its {} eligible devices under one value of {}", of_class,
                        fmt::join(match_attributes, ", "));
    } else if (match_attributes.empty()) {
      why = fmt::format(
          "no node has {} devices of {} that the request allows (at most {} on one "
          "node)",
          total, of_class, e.most_in_a_group);
    } else {
      why = fmt::format(
          "matchAttribute {} cannot be satisfied with {} devices on any node: at most {} "
          "eligible devices of {} share one value",
          fmt::join(match_attributes, ", "), total, e.most_in_a_group, of_class);
    }
    if (!e.runtime_error.empty()) why += fmt::format("; a selector failed: {}", e.runtime_error);
    reasons.push_back(fmt::format("request {}: {}", alternative.request, why));
  }
  if (plan.choices.empty()) {
    plan.unevaluated = no_gpu_of_class;
    plan.refused =
        fmt::format("{} cannot be allocated on any node: {}", who, fmt::join(reasons, "; "));
  }
  return plan;
}

json claim_status_for(const ClaimObject& claim, const PodObject& pod, const std::string& node,
                      const std::vector<int>& gpus, const std::vector<ClaimChoice::Part>& parts,
                      const DraInventory& inventory) {
  json out = claim.object;
  json status = field(out, "status").is_object() ? out["status"] : json::object();
  if (!gpus.empty()) {
    const DraNode* n = inventory.node(node);
    json results = json::array();
    json config = json::array();
    std::size_t next = 0;
    for (const auto& part : parts) {
      if (part.claim != claim.key()) continue;
      for (int i = 0; i < part.count && next < gpus.size(); ++i, ++next) {
        const int gpu = gpus[next];
        if (n == nullptr)
          throw std::runtime_error(fmt::format("node {} publishes no devices", node));
        const auto d = std::find_if(n->devices.begin(), n->devices.end(),
                                    [&](const DraDevice& x) { return x.gpu == gpu; });
        if (d == n->devices.end()) {
          throw std::runtime_error(
              fmt::format("GPU {} of node {} is no longer published", gpu, node));
        }
        results.push_back({{"request", part.request},
                           {"driver", d->view.driver},
                           {"pool", d->pool},
                           {"device", d->name}});
      }
      for (const json& c : array_of(part.class_config)) {
        json entry = c;
        entry["source"] = "FromClass";
        entry["requests"] = json::array({part.request});
        config.push_back(std::move(entry));
      }
    }
    const json& claim_devices = field(field(claim.object, "spec"), "devices");
    for (const json& c : array_of(field(claim_devices, "config"))) {
      json entry = c;
      entry["source"] = "FromClaim";
      config.push_back(std::move(entry));
    }
    json devices = {{"results", results}};
    if (!config.empty()) devices["config"] = config;
    status["allocation"] = {
        {"devices", devices},
        {"nodeSelector",
         {{"nodeSelectorTerms",
           json::array({{{"matchFields", json::array({{{"key", "metadata.name"},
                                                       {"operator", "In"},
                                                       {"values", json::array({node})}}})}}})}}}};
  }
  json reserved = array_of(field(status, "reservedFor"));
  bool there = false;
  for (const json& r : reserved) there = there || str(r, "uid") == pod.uid;
  if (!there) reserved.push_back({{"resource", "pods"}, {"name", pod.name}, {"uid", pod.uid}});
  status["reservedFor"] = reserved;
  out["status"] = status;
  return out;
}

json claim_released(const ClaimObject& claim, const std::string& pod_uid) {
  json out = claim.object;
  const json& status = field(out, "status");
  const json reserved = array_of(field(status, "reservedFor"));
  json kept = json::array();
  for (const json& r : reserved) {
    if (str(r, "uid") != pod_uid) kept.push_back(r);
  }
  if (kept.size() == reserved.size()) return json();
  if (kept.empty()) {
    out["status"].erase("reservedFor");
    out["status"].erase("allocation");  // nobody uses it: its devices are free again
  } else {
    out["status"]["reservedFor"] = kept;
  }
  return out;
}

}  // namespace gpuorch::k8s

#include "gpuorch/k8s/mirror/dra_claims.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "gpuorch/base/printable.hpp"
#include "gpuorch/k8s/api/object_fields.hpp"
#include "gpuorch/k8s/mirror/device_assignment.hpp"

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

namespace {

// A claim's requests and constraints as read.
struct ParsedConstraint {
  std::vector<std::string> requests;  // empty: all of the claim's
  std::string attribute;
  bool distinct = false;
};
struct ParsedClaim {
  const ClaimObject* claim = nullptr;
  std::vector<std::string> names;            // the requests' names
  std::vector<std::vector<DeviceAsk>> asks;  // each request's alternatives
  std::vector<ParsedConstraint> constraints;
};

// Reads the claim's requests and constraints into `out`; "" when gpuorch evaluates them, else why
// not (`unevaluated` says whether gpuorch's limits are why).
std::string read_claim(const ClaimObject& claim, ParsedClaim& out, bool& unevaluated) {
  const std::string who = "ResourceClaim " + claim.key();
  out.claim = &claim;
  const json& devices = field(field(claim.object, "spec"), "devices");
  const json& requests = field(devices, "requests");
  if (!requests.is_array() || requests.empty()) return fmt::format("{} asks for no device", who);
  for (const json& r : requests) {
    const std::string name = str(r, "name");
    std::vector<DeviceAsk> alternatives;
    if (const json& exactly = field(r, "exactly"); exactly.is_object()) {
      DeviceAsk a;
      if (const std::string why = read_ask(exactly, name, a); !why.empty()) {
        unevaluated = true;
        return fmt::format("{} request {}: {} is not evaluated by gpuorch scheduler", who, name,
                           why);
      }
      alternatives.push_back(std::move(a));
    } else if (const json& first = field(r, "firstAvailable"); first.is_array()) {
      for (const json& sub : first) {
        DeviceAsk a;
        const std::string sub_name = name + "/" + str(sub, "name");
        if (const std::string why = read_ask(sub, sub_name, a); !why.empty()) {
          unevaluated = true;
          return fmt::format("{} request {}: {} is not evaluated by gpuorch scheduler", who,
                             sub_name, why);
        }
        alternatives.push_back(std::move(a));
      }
    }
    if (alternatives.empty()) {
      return fmt::format("{} request {}: neither exactly nor firstAvailable", who, name);
    }
    out.names.push_back(name);
    out.asks.push_back(std::move(alternatives));
  }
  for (const json& c : array_of(field(devices, "constraints"))) {
    ParsedConstraint pc;
    const std::string match = str(c, "matchAttribute");
    const std::string distinct = str(c, "distinctAttribute");
    if (match.empty() == distinct.empty()) {
      return fmt::format(
          "{}: a constraint without exactly one of matchAttribute and "
          "distinctAttribute",
          who);
    }
    pc.attribute = qualified_attribute(match.empty() ? distinct : match);
    pc.distinct = !distinct.empty();
    for (const json& r : array_of(field(c, "requests"))) {
      if (!r.is_string()) return fmt::format("{}: a constraint's request that is not a name", who);
      const std::string name = r.get<std::string>();
      const std::string main = name.substr(0, name.find('/'));
      if (std::find(out.names.begin(), out.names.end(), main) == out.names.end()) {
        return fmt::format("{}: a constraint names request {}, which the claim does not have", who,
                           base::printable(name));
      }
      pc.requests.push_back(name);
    }
    out.constraints.push_back(std::move(pc));
  }
  return "";
}

// Whether a constraint holds for a request's alternative: it names no request, the request, or
// this subrequest ("request/subrequest").
bool constrains(const ParsedConstraint& c, const std::string& name, const DeviceAsk& alternative) {
  if (c.requests.empty()) return true;
  return std::find(c.requests.begin(), c.requests.end(), name) != c.requests.end() ||
         std::find(c.requests.begin(), c.requests.end(), alternative.request) != c.requests.end();
}

// A claim whose requests all ask for the same devices (class and selectors, no All beside
// others) under matchAttribute constraints on all of them: the one-group form, where any of a
// group's devices serves any request.
bool one_ask(const ParsedClaim& p) {
  for (const ParsedConstraint& c : p.constraints) {
    if (c.distinct) return false;
    for (const std::string& name : p.names) {
      if (!c.requests.empty() &&
          std::find(c.requests.begin(), c.requests.end(), name) == c.requests.end()) {
        return false;
      }
    }
  }
  if (p.asks.size() == 1) return true;
  for (const auto& a : p.asks) {
    if (a.size() != 1 || a[0].all || a[0].device_class != p.asks[0][0].device_class ||
        a[0].selectors != p.asks[0][0].selectors) {
      return false;
    }
  }
  return true;
}

// The eligibility of alternatives, through the cache, and why one cannot be met.
class Evaluator {
 public:
  Evaluator(const std::map<std::string, DeviceClassObject>& classes, const DraInventory& inventory,
            const std::set<std::string>& gpu_nodes, EligibilityCache* cache, ClaimPlan& plan)
      : classes_(classes),
        inventory_(inventory),
        gpu_nodes_(gpu_nodes),
        cache_(cache),
        plan_(plan) {}

  // The alternative's eligible GPUs grouped by `match_attributes`; nullopt when the plan is
  // decided (waiting for its class, or refused: a selector outside the subset).
  std::optional<Eligibility> eligibility(const std::string& who, const DeviceAsk& alternative,
                                         const std::vector<std::string>& match_attributes,
                                         std::string* key_out = nullptr) {
    const auto cls = classes_.find(alternative.device_class);
    if (cls == classes_.end()) {
      plan_.waiting = fmt::format("{} request {}: DeviceClass {} does not exist; waiting for it",
                                  who, alternative.request, alternative.device_class);
      return std::nullopt;
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
      plan_.unevaluated = true;
      plan_.refused = fmt::format(
          "{} request {}: the selector `{}` is outside the CEL subset gpuorch scheduler "
          "evaluates ({}); it refuses the claim rather than guess (docs/dra.md, \"The CEL "
          "subset\")",
          who, alternative.request, base::printable(expression), e.what());
      return std::nullopt;
    }
    // What decides eligibility, as one key: the class's and the request's selectors, the
    // constrained attributes, the pinned node (unit separators never appear in a selector's
    // meaning: a selector holding one only misses the cache).
    const std::string key =
        fmt::format("{}\x1e{}\x1e{}\x1e{}", fmt::join(cls->second.selectors, "\x1f"),
                    fmt::join(alternative.selectors, "\x1f"), fmt::join(match_attributes, "\x1f"),
                    plan_.pinned_node);
    if (key_out != nullptr) *key_out = key;
    if (cache_ != nullptr) {
      if (const auto hit = cache_->find(key); hit != cache_->end()) return hit->second;
    }
    Eligibility computed = eligible_gpus(class_selectors, selectors, match_attributes, inventory_,
                                         gpu_nodes_, plan_.pinned_node);
    remember(key, computed);
    return computed;
  }

  void remember(const std::string& key, const Eligibility& e) {
    if (cache_ == nullptr) return;
    if (cache_->size() >= 1024) cache_->clear();  // bounded: distinct requests are few
    cache_->emplace(key, e);
  }
  [[nodiscard]] const Eligibility* cached(const std::string& key) const {
    if (cache_ == nullptr) return nullptr;
    const auto hit = cache_->find(key);
    return hit == cache_->end() ? nullptr : &hit->second;
  }

  // Why `alternative` cannot be met on any node, even an empty one, asking `total` devices.
  std::string why_not(const DeviceAsk& alternative, const Eligibility& e, int total,
                      const std::vector<std::string>& match_attributes) {
    std::string why;
    const std::string of_class = fmt::format("DeviceClass {}", alternative.device_class);
    if (e.class_devices == 0) {
      no_gpu_of_class = true;
      why = fmt::format(
          "no device of {} on any node (gpuorch scheduler allocates whole GPUs and MIG "
          "instances of {} on nodes that publish them in ResourceSlices)",
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
    return fmt::format("request {}: {}", alternative.request, why);
  }

  // A class none of whose devices is a whole GPU of gpuorch's driver may be another driver's
  // (a NIC, MIG): what those devices are gpuorch does not model.
  bool no_gpu_of_class = false;

 private:
  const std::map<std::string, DeviceClassObject>& classes_;
  const DraInventory& inventory_;
  const std::set<std::string>& gpu_nodes_;
  EligibilityCache* cache_;
  ClaimPlan& plan_;
};

// The node's devices by GPU index (what constraints read the attributes of).
std::vector<const DraDevice*> devices_by_gpu(const DraNode& n) {
  std::vector<const DraDevice*> out(static_cast<std::size_t>(n.gpu_count), nullptr);
  for (const DraDevice& d : n.devices) {
    if (d.gpu >= 0 && d.gpu < n.gpu_count) out[static_cast<std::size_t>(d.gpu)] = &d;
  }
  return out;
}

ClaimChoice::Part make_part(std::string claim, std::string request, int count, json config) {
  ClaimChoice::Part p;
  p.claim = std::move(claim);
  p.request = std::move(request);
  p.count = count;
  p.class_config = std::move(config);
  return p;
}

const json& class_config(const std::map<std::string, DeviceClassObject>& classes,
                         const std::string& name) {
  static const json kNone = json::array();
  const auto it = classes.find(name);
  return it == classes.end() ? kNone : it->second.config;
}

// One claim whose requests are one ask (one_ask): the groups of its eligible GPUs.
void plan_one_ask(const ParsedClaim& p, const std::map<std::string, DeviceClassObject>& classes,
                  Evaluator& evaluator, ClaimPlan& plan) {
  const ClaimObject& claim = *p.claim;
  const std::string who = "ResourceClaim " + claim.key();
  std::vector<std::string> match_attributes;
  for (const ParsedConstraint& c : p.constraints) match_attributes.push_back(c.attribute);
  const auto& asks = p.asks;
  std::vector<std::string> reasons;
  for (const DeviceAsk& alternative : asks[0]) {
    const auto found = evaluator.eligibility(who, alternative, match_attributes);
    if (!found) return;
    const Eligibility& e = *found;
    const json& config = class_config(classes, alternative.device_class);
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
        choice.parts.push_back(make_part(claim.key(), alternative.request, count, config));
        plan.choices.push_back(std::move(choice));
        met = true;
      }
    } else if (e.most_in_a_group >= total) {
      ClaimChoice choice;
      choice.gpus = total;
      choice.groups = e.groups;
      if (asks.size() == 1) {
        choice.parts.push_back(make_part(claim.key(), alternative.request, total, config));
      } else {
        for (const auto& a : asks) {
          choice.parts.push_back(make_part(claim.key(), a[0].request, a[0].count, config));
        }
      }
      plan.choices.push_back(std::move(choice));
      met = true;
    }
    if (!met) reasons.push_back(evaluator.why_not(alternative, e, total, match_attributes));
  }
  if (plan.choices.empty()) {
    plan.unevaluated = evaluator.no_gpu_of_class;
    plan.refused =
        fmt::format("{} cannot be allocated on any node: {}", who, fmt::join(reasons, "; "));
  }
}

// Bound on the combinations of firstAvailable subrequests tried (in preference order).
constexpr std::size_t kCombinations = 64;

// Any number of claims and requests: per node, the sets of devices that meet every request of
// every claim together (device_assignment.hpp); one choice per combination of subrequests and
// number of devices.
void plan_together(const std::vector<ParsedClaim>& parsed,
                   const std::map<std::string, DeviceClassObject>& classes,
                   const DraInventory& inventory, Evaluator& evaluator, ClaimPlan& plan) {
  // Every request of every claim, its alternatives that can be met alone, eligibility by node.
  struct Request {
    std::size_t claim;
    std::string name;
    std::vector<DeviceAsk> alternatives;
    std::vector<Eligibility> eligibility;
    std::vector<std::string> keys;
  };
  std::vector<Request> requests;
  std::vector<std::string> who;
  for (const ParsedClaim& p : parsed) who.push_back("ResourceClaim " + p.claim->key());
  for (std::size_t c = 0; c < parsed.size(); ++c) {
    for (std::size_t r = 0; r < parsed[c].asks.size(); ++r) {
      Request req{c, parsed[c].names[r], {}, {}, {}};
      std::vector<std::string> reasons;
      for (const DeviceAsk& alternative : parsed[c].asks[r]) {
        std::string key;
        const auto found = evaluator.eligibility(who[c], alternative, {}, &key);
        if (!found) return;
        const bool alone =
            alternative.all ? !found->groups.empty() : found->most_in_a_group >= alternative.count;
        if (!alone) {
          reasons.push_back(evaluator.why_not(alternative, *found, alternative.count, {}));
          continue;
        }
        req.alternatives.push_back(alternative);
        req.eligibility.push_back(*found);
        req.keys.push_back(key);
      }
      if (req.alternatives.empty()) {
        plan.unevaluated = evaluator.no_gpu_of_class;
        plan.refused =
            fmt::format("{} cannot be allocated on any node: {}", who[c], fmt::join(reasons, "; "));
        return;
      }
      requests.push_back(std::move(req));
    }
  }
  std::vector<std::size_t> at(requests.size(), 0);  // the alternative of each request
  bool truncated = false;
  for (std::size_t combination = 0; combination < kCombinations; ++combination) {
    // The parts and constraints of this combination.
    ClaimChoice base;
    std::string key = plan.pinned_node;
    for (std::size_t r = 0; r < requests.size(); ++r) {
      const DeviceAsk& a = requests[r].alternatives[at[r]];
      ClaimChoice::Part part = make_part(parsed[requests[r].claim].claim->key(), a.request, a.count,
                                         class_config(classes, a.device_class));
      part.all = a.all;
      part.eligible = requests[r].eligibility[at[r]].groups;
      base.parts.push_back(std::move(part));
      key += fmt::format("\x1d{}\x1c{}\x1c{}\x1c{}", requests[r].claim, requests[r].keys[at[r]],
                         a.all, a.count);
    }
    for (std::size_t c = 0; c < parsed.size(); ++c) {
      for (const ParsedConstraint& pc : parsed[c].constraints) {
        ClaimChoice::Constraint limit{{}, pc.attribute, pc.distinct};
        for (std::size_t r = 0; r < requests.size(); ++r) {
          if (requests[r].claim == c &&
              constrains(pc, requests[r].name, requests[r].alternatives[at[r]])) {
            limit.parts.push_back(r);
          }
        }
        key += fmt::format("\x1d{}\x1c{}\x1c{}", fmt::join(limit.parts, ","), limit.attribute,
                           limit.distinct);
        base.constraints.push_back(std::move(limit));
      }
    }
    // The valid sets of every node, through the cache (pods of one template ask alike).
    const Eligibility* unions = evaluator.cached(key);
    Eligibility computed;
    if (unions == nullptr) {
      for (const workload::NodeGpuGroups& first : base.parts[0].eligible) {
        const DraNode* devices = inventory.node(first.node);
        if (devices == nullptr) continue;
        std::vector<RequestSlot> slots;
        for (const ClaimChoice::Part& part : base.parts) {
          const auto e = std::find_if(part.eligible.begin(), part.eligible.end(),
                                      [&](const auto& g) { return g.node == first.node; });
          RequestSlot slot;
          slot.all = part.all;
          slot.count = part.count;
          if (e != part.eligible.end() && !e->groups.empty()) slot.eligible = e->groups[0];
          slots.push_back(std::move(slot));
        }
        std::vector<SlotConstraint> limits;
        for (const auto& c : base.constraints) limits.push_back({c.parts, c.attribute, c.distinct});
        const std::vector<const DraDevice*> table = devices_by_gpu(*devices);
        const AttributeOf attribute_of = [&table](int gpu, const std::string& attribute) {
          const auto g = static_cast<std::size_t>(gpu);
          if (g >= table.size() || table[g] == nullptr) return std::optional<std::string>();
          return attribute_key(*table[g], attribute);
        };
        ValidUnions found = valid_unions(slots, limits, attribute_of);
        computed.truncated = computed.truncated || found.truncated;
        if (found.sets.empty()) continue;
        computed.groups.push_back({first.node, std::move(found.sets)});
      }
      evaluator.remember(key, computed);
      unions = &computed;
    }
    truncated = truncated || unions->truncated;
    // One choice per number of devices (All requests make it the node's).
    std::map<int, std::vector<workload::NodeGpuGroups>> by_size;
    for (const workload::NodeGpuGroups& g : unions->groups) {
      std::map<int, std::vector<std::vector<int>>> sets;
      for (const auto& set : g.groups) sets[static_cast<int>(set.size())].push_back(set);
      for (auto& [size, list] : sets) by_size[size].push_back({g.node, std::move(list)});
    }
    for (auto& [size, groups] : by_size) {
      ClaimChoice choice = base;
      choice.gpus = size;
      choice.groups = std::move(groups);
      plan.choices.push_back(std::move(choice));
    }
    // The next combination: the last request's alternatives vary fastest, so earlier requests
    // keep their preferred subrequests longest.
    bool next = false;
    for (std::size_t r = requests.size(); r > 0 && !next; --r) {
      next = ++at[r - 1] < requests[r - 1].alternatives.size();
      if (!next) at[r - 1] = 0;
    }
    if (!next) break;  // every combination tried
  }
  if (!plan.choices.empty()) return;
  std::vector<std::string> names;
  std::vector<std::string> limits;
  for (const Request& r : requests) names.push_back(fmt::format("{}", r.name));
  for (const ParsedClaim& p : parsed) {
    for (const ParsedConstraint& c : p.constraints) {
      limits.push_back(fmt::format(
          "{} {}{}", c.distinct ? "distinctAttribute" : "matchAttribute", c.attribute,
          c.requests.empty() ? std::string() : fmt::format(" on {}", fmt::join(c.requests, ", "))));
    }
  }
  plan.refused = fmt::format(
      "{} cannot be allocated on any node: no node has devices for requests {} together (each "
      "device at most once{}{}){}",
      fmt::join(who, ", "), fmt::join(names, ", "), limits.empty() ? "" : "; ",
      fmt::join(limits, "; "),
      truncated ? fmt::format("; the search stopped after {} sets of a node", kUnionsExamined)
                : "");
}

}  // namespace

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
    if (std::find(plan.claims.begin(), plan.claims.end(), c.key()) != plan.claims.end()) {
      continue;  // two entries of the pod naming one claim: it is allocated once
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
  std::vector<ParsedClaim> parsed(to_allocate.size());
  for (std::size_t i = 0; i < to_allocate.size(); ++i) {
    if (const std::string why = read_claim(*to_allocate[i], parsed[i], plan.unevaluated);
        !why.empty()) {
      plan.refused = why;
      return plan;
    }
  }
  Evaluator evaluator(classes, inventory, gpu_nodes, cache, plan);
  if (parsed.size() == 1 && one_ask(parsed[0])) {
    plan_one_ask(parsed[0], classes, evaluator, plan);
  } else {
    plan_together(parsed, classes, inventory, evaluator, plan);
  }
  return plan;
}

std::vector<DeviceResult> device_results(const ClaimChoice& choice, const std::string& node,
                                         const std::vector<int>& gpus,
                                         const DraInventory& inventory) {
  std::vector<DeviceResult> out;
  const bool in_order = std::all_of(choice.parts.begin(), choice.parts.end(),
                                    [](const auto& p) { return p.eligible.empty(); });
  if (in_order) {
    std::size_t next = 0;
    for (std::size_t p = 0; p < choice.parts.size(); ++p) {
      for (int i = 0; i < choice.parts[p].count && next < gpus.size(); ++i, ++next) {
        out.push_back({p, gpus[next]});
      }
    }
    return out;
  }
  const DraNode* n = inventory.node(node);
  if (n == nullptr) throw std::runtime_error(fmt::format("node {} publishes no devices", node));
  const std::vector<const DraDevice*> table = devices_by_gpu(*n);
  std::vector<RequestSlot> slots;
  for (const auto& part : choice.parts) {
    RequestSlot slot;
    slot.all = part.all;
    slot.count = part.count;
    for (const auto& g : part.eligible) {
      if (g.node == node && !g.groups.empty()) slot.eligible = g.groups[0];
    }
    slots.push_back(std::move(slot));
  }
  std::vector<SlotConstraint> limits;
  for (const auto& c : choice.constraints) limits.push_back({c.parts, c.attribute, c.distinct});
  const AttributeOf attribute_of = [&table](int gpu, const std::string& attribute) {
    const auto g = static_cast<std::size_t>(gpu);
    if (g >= table.size() || table[g] == nullptr) return std::optional<std::string>();
    return attribute_key(*table[g], attribute);
  };
  std::vector<int> sorted = gpus;
  std::sort(sorted.begin(), sorted.end());
  const auto assigned = assign_devices(sorted, slots, limits, attribute_of);
  if (!assigned) {
    throw std::runtime_error(fmt::format("GPUs {} of node {} do not meet the claims' requests",
                                         fmt::join(sorted, ","), node));
  }
  for (std::size_t p = 0; p < choice.parts.size(); ++p) {
    for (std::size_t i = 0; i < sorted.size(); ++i) {
      if ((*assigned)[i] == p) out.push_back({p, sorted[i]});
    }
  }
  return out;
}

json claim_status_for(const ClaimObject& claim, const PodObject& pod, const std::string& node,
                      const std::vector<DeviceResult>& results,
                      const std::vector<ClaimChoice::Part>& parts, const DraInventory& inventory) {
  json out = claim.object;
  json status = field(out, "status").is_object() ? out["status"] : json::object();
  const auto ours = [&](const DeviceResult& r) {
    return r.part < parts.size() && parts[r.part].claim == claim.key();
  };
  if (std::any_of(results.begin(), results.end(), ours)) {
    const DraNode* n = inventory.node(node);
    if (n == nullptr) throw std::runtime_error(fmt::format("node {} publishes no devices", node));
    json devices_out = json::array();
    json config = json::array();
    for (const DeviceResult& r : results) {
      if (!ours(r)) continue;
      const auto d = std::find_if(n->devices.begin(), n->devices.end(),
                                  [&](const DraDevice& x) { return x.gpu == r.gpu; });
      if (d == n->devices.end()) {
        throw std::runtime_error(
            fmt::format("GPU {} of node {} is no longer published", r.gpu, node));
      }
      devices_out.push_back({{"request", parts[r.part].request},
                             {"driver", d->view.driver},
                             {"pool", d->pool},
                             {"device", d->name}});
    }
    for (const auto& part : parts) {
      if (part.claim != claim.key()) continue;
      for (const json& c : array_of(part.class_config)) {
        json entry = c;
        entry["source"] = "FromClass";
        entry["requests"] = json::array({part.request});
        config.push_back(std::move(entry));
      }
    }
    json results_json = std::move(devices_out);
    const json& claim_devices = field(field(claim.object, "spec"), "devices");
    for (const json& c : array_of(field(claim_devices, "config"))) {
      json entry = c;
      entry["source"] = "FromClaim";
      config.push_back(std::move(entry));
    }
    json devices = {{"results", results_json}};
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

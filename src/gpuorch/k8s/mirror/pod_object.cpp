#include "gpuorch/k8s/mirror/pod_object.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <set>
#include <stdexcept>

#include "gpuorch/base/printable.hpp"
#include "gpuorch/base/utc_time.hpp"
#include "gpuorch/k8s/api/object_fields.hpp"
#include "gpuorch/k8s/api/quantity.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"
#include "gpuorch/k8s/mirror/unevaluated_fields.hpp"

namespace gpuorch::k8s {
namespace {

using nlohmann::json;

// How much of a value a pod gave a message quotes (an annotation may be 256 KiB).
constexpr std::size_t kQuoted = 64;

// Thrown inside pod_from_json for a request it cannot use; becomes PodObject::error.
struct BadPod : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Resources {
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  std::int64_t gpus = 0;
  std::int64_t share_milli = 0;  // the extended resource gpuorch.io/gpu-milli (a share of one GPU)
};

// A container's requests; limits stand in for a missing request, as the API server defaults them.
Resources container_resources(const json& c) {
  Resources r;
  const json& res = field(c, "resources");
  auto value = [&](const char* key) -> std::optional<std::string> {
    for (const char* part : {"requests", "limits"}) {
      const json& q = field(field(res, part), key);
      if (q.is_string()) return q.get<std::string>();
      if (q.is_number()) return q.dump();
      if (!q.is_null()) throw BadPod(fmt::format("{} {} is not a quantity", part, key));
    }
    return std::nullopt;
  };
  if (const auto v = value("cpu")) {
    const auto q = quantity_milli(*v);
    if (!q) throw BadPod(fmt::format("cpu '{}' is not a quantity", *v));
    r.cpu_milli = *q;
  }
  if (const auto v = value("memory")) {
    const auto q = quantity_mib(*v, true);
    if (!q) throw BadPod(fmt::format("memory '{}' is not a quantity", *v));
    r.memory_mib = *q;
  }
  for (const char* gpu : kGpuResources) {
    if (const auto v = value(gpu)) {
      const auto q = quantity_count(*v);
      if (!q || *q > 4096) throw BadPod(fmt::format("{} '{}' is not a GPU count", gpu, *v));
      r.gpus += *q;
    }
  }
  // A DeviceClass asked by its implicit extended resource name (KEP-5004): whole GPUs as well,
  // that only the DRA bridge can give (docs/dra.md).
  std::set<std::string> implicit;
  for (const char* part : {"requests", "limits"}) {
    if (const json& m = field(res, part); m.is_object()) {
      for (const auto& [k, v] : m.items()) {
        if (k.starts_with(kImplicitClassPrefix)) implicit.insert(k);
      }
    }
  }
  for (const std::string& name : implicit) {
    const auto q = quantity_count(*value(name.c_str()));
    if (!q || *q > 4096) throw BadPod(fmt::format("{} is not a GPU count", name));
    r.gpus += *q;
  }
  if (const auto v = value(kGpuMilliAnnotation)) {
    const auto q = quantity_count(*v);
    if (!q || *q < 1 || *q > 1000) {
      throw BadPod(fmt::format("{} '{}' is not in 1..1000", kGpuMilliAnnotation, *v));
    }
    r.share_milli = *q;
  }
  return r;
}

// Kubernetes' effective request: the containers' sum, or the largest init container if that is
// more (init containers run one at a time, before the others), plus the pod overhead.
Resources pod_resources(const json& spec) {
  Resources sum;
  const json& containers = field(spec, "containers");
  if (containers.is_array()) {
    for (const json& c : containers) {
      const Resources r = container_resources(c);
      sum.cpu_milli += r.cpu_milli;
      sum.memory_mib += r.memory_mib;
      sum.gpus += r.gpus;
      if (r.share_milli > 0) {
        if (sum.share_milli > 0) throw BadPod("more than one container asks for a GPU share");
        sum.share_milli = r.share_milli;
      }
    }
  }
  const json& init = field(spec, "initContainers");
  if (init.is_array()) {
    for (const json& c : init) {
      const Resources r = container_resources(c);
      sum.cpu_milli = std::max(sum.cpu_milli, r.cpu_milli);
      sum.memory_mib = std::max(sum.memory_mib, r.memory_mib);
      sum.gpus = std::max(sum.gpus, r.gpus);
    }
  }
  const json& overhead = field(spec, "overhead");
  if (const json& cpu = field(overhead, "cpu"); cpu.is_string()) {
    sum.cpu_milli += quantity_milli(cpu.get<std::string>()).value_or(0);
  }
  if (const json& mem = field(overhead, "memory"); mem.is_string()) {
    sum.memory_mib += quantity_mib(mem.get<std::string>(), true).value_or(0);
  }
  return sum;
}

std::vector<std::string> string_list(const json& j, const char* what) {
  std::vector<std::string> out;
  if (j.is_null()) return out;
  if (!j.is_array()) throw BadPod(fmt::format("{} is not a list", what));
  for (const json& v : j) {
    if (!v.is_string()) throw BadPod(fmt::format("{} holds a non-string", what));
    out.push_back(v.get<std::string>());
  }
  return out;
}

workload::NodeSelectorRequirement requirement(const json& j) {
  workload::NodeSelectorRequirement r;
  r.key = str(j, "key");
  const std::string op = str(j, "operator");
  using workload::SelectorOp;
  if (op == "In") {
    r.op = SelectorOp::kIn;
  } else if (op == "NotIn") {
    r.op = SelectorOp::kNotIn;
  } else if (op == "Exists") {
    r.op = SelectorOp::kExists;
  } else if (op == "DoesNotExist") {
    r.op = SelectorOp::kDoesNotExist;
  } else if (op == "Gt") {
    r.op = SelectorOp::kGt;
  } else if (op == "Lt") {
    r.op = SelectorOp::kLt;
  } else {
    throw BadPod(
        fmt::format("node affinity operator '{}' is not one of In, NotIn, Exists, "
                    "DoesNotExist, Gt, Lt",
                    op));
  }
  r.values = string_list(field(j, "values"), "node affinity values");
  return r;
}

void read_affinity(const json& spec, workload::PodSpec& pod) {
  const json& required = field(field(field(spec, "affinity"), "nodeAffinity"),
                               "requiredDuringSchedulingIgnoredDuringExecution");
  const json& terms = field(required, "nodeSelectorTerms");
  if (!terms.is_array()) return;
  for (const json& t : terms) {
    workload::NodeSelectorTerm term;
    for (const char* part : {"matchExpressions", "matchFields"}) {
      const json& list = field(t, part);
      if (list.is_null()) continue;
      if (!list.is_array()) throw BadPod(fmt::format("node affinity {} is not a list", part));
      auto& out = part[5] == 'E' ? term.match_expressions : term.match_fields;
      for (const json& r : list) out.push_back(requirement(r));
    }
    pod.constraints.required_terms.push_back(std::move(term));
  }
  // One term naming GPU models (the seed's `gpu-type In [a100]`, openb's gpu_spec): the models
  // become the request's, so the core filters and explains them as GPU models.
  if (pod.constraints.required_terms.size() != 1 || pod.gpu_count == 0) return;
  auto& exprs = pod.constraints.required_terms.front().match_expressions;
  const auto it = std::find_if(exprs.begin(), exprs.end(), [](const auto& r) {
    return r.key == kGpuProductLabel && r.op == workload::SelectorOp::kIn;
  });
  if (it == exprs.end()) return;
  pod.allowed_models = it->values;
  exprs.erase(it);
  if (exprs.empty() && pod.constraints.required_terms.front().match_fields.empty()) {
    pod.constraints.required_terms.clear();
  }
}

std::vector<int> gpu_list(const std::string& text) {
  std::vector<int> out;
  if (!text.empty() && text.back() == ',') return out;  // "1,": cut short, not a list
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    int v = -1;
    const auto [p, ec] = std::from_chars(text.data() + start, text.data() + end, v);
    if (ec != std::errc() || p != text.data() + end || v < 0 || v > 4095) return {};
    // A GPU named twice ("1,1") is no assignment: counting it would take the GPU twice (found by
    // fuzz/extender_requests), so the pod is counted as if unannotated.
    if (std::find(out.begin(), out.end(), v) != out.end()) return {};
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

void read_request(const json& obj, PodObject& p) {
  const json& spec = field(obj, "spec");
  const json& annotations = field(field(obj, "metadata"), "annotations");
  const Resources r = pod_resources(spec);
  workload::PodSpec& pod = p.spec;
  pod.cpu_milli = r.cpu_milli;
  pod.memory_mib = r.memory_mib;
  pod.gpu_count = static_cast<int>(r.gpus);
  pod.gpu_milli = r.gpus > 0 ? 1000 : 0;
  // Present means asked, even when empty: `gpu-fraction: ""` is a bad request, not none.
  const json& fraction_field = field(annotations, kGpuFractionAnnotation);
  const json& milli_field = field(annotations, kGpuMilliAnnotation);
  p.gpu_milli_annotated = !milli_field.is_null();
  const bool has_fraction = !fraction_field.is_null();
  const std::string fraction = str(annotations, kGpuFractionAnnotation);
  const std::string milli_text = str(annotations, kGpuMilliAnnotation);
  // A bound pod carries the gpuorch.io/gpu-milli its scheduler wrote beside its fraction; before
  // binding, two ways of asking are refused rather than one silently preferred.
  if (p.node_name.empty()) {
    std::vector<std::string> ways;
    if (has_fraction) {
      ways.push_back(fmt::format("annotation {} '{}'", kGpuFractionAnnotation,
                                 base::printable(fraction, kQuoted)));
    }
    if (p.gpu_milli_annotated) {
      ways.push_back(fmt::format("annotation {} '{}'", kGpuMilliAnnotation,
                                 base::printable(milli_text, kQuoted)));
    }
    if (r.share_milli > 0) {
      ways.push_back(fmt::format("resource {} {}", kGpuMilliAnnotation, r.share_milli));
    }
    if (ways.size() > 1) {
      throw BadPod(fmt::format("asks for a GPU share in {} ways ({}); keep one", ways.size(),
                               fmt::join(ways, ", ")));
    }
  }
  if (has_fraction || p.gpu_milli_annotated || r.share_milli > 0) {
    if (r.gpus > 0) {
      throw BadPod("asks for whole GPUs and a GPU fraction at once");
    }
    std::optional<std::int64_t> m;
    if (has_fraction) {
      m = fraction_field.is_string() ? quantity_milli(fraction) : std::nullopt;
      if (!m || *m < 1 || *m > 1000) {
        throw BadPod(fmt::format("{} '{}' is not in (0, 1]", kGpuFractionAnnotation,
                                 base::printable(fraction, kQuoted)));
      }
    } else if (r.share_milli > 0) {
      m = r.share_milli;
    } else {
      m = milli_field.is_string() ? quantity_count(milli_text) : std::nullopt;
      if (!m || *m < 1 || *m > 1000) {
        throw BadPod(fmt::format("{} '{}' is not in 1..1000", kGpuMilliAnnotation,
                                 base::printable(milli_text, kQuoted)));
      }
    }
    pod.gpu_count = 1;
    pod.gpu_milli = *m;
  }
  const json& selector = field(spec, "nodeSelector");
  if (selector.is_object()) {
    for (const auto& [k, v] : selector.items()) {
      if (!v.is_string()) throw BadPod(fmt::format("nodeSelector {} is not a string", k));
      if (k == kGpuProductLabel && pod.gpu_count > 0 && pod.allowed_models.empty()) {
        pod.allowed_models = {v.get<std::string>()};
      } else {
        pod.constraints.node_selector.emplace_back(k, v.get<std::string>());
      }
    }
    std::sort(pod.constraints.node_selector.begin(), pod.constraints.node_selector.end());
  }
  read_affinity(spec, pod);
  const json& tolerations = field(spec, "tolerations");
  if (tolerations.is_array()) {
    for (const json& t : tolerations) {
      workload::Toleration tol;
      tol.key = str(t, "key");
      const std::string op = str(t, "operator");
      if (op != "" && op != "Equal" && op != "Exists") {
        throw BadPod(fmt::format("toleration operator '{}' is not Equal or Exists", op));
      }
      tol.exists = op == "Exists";
      tol.value = str(t, "value");
      tol.effect = str(t, "effect");
      pod.constraints.tolerations.push_back(std::move(tol));
    }
  }
}

}  // namespace

std::int64_t rfc3339_seconds(const std::string& text) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0, used = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &used) !=
      6) {
    return -1;
  }
  std::size_t at = static_cast<std::size_t>(used);
  if (at < text.size() && text[at] == '.') {
    ++at;
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])) != 0) ++at;
  }
  std::int64_t offset = 0;
  if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
    int oh = 0, om = 0;
    if (std::sscanf(text.c_str() + at + 1, "%2d:%2d", &oh, &om) != 2 || oh > 23 || om > 59) {
      return -1;
    }
    offset = (text[at] == '+' ? 1 : -1) * (std::int64_t{oh} * 3600 + std::int64_t{om} * 60);
    at += 6;
  } else if (at < text.size() && (text[at] == 'Z' || text[at] == 'z')) {
    ++at;
  } else {
    return -1;
  }
  if (at != text.size()) return -1;
  const std::int64_t local = base::utc_seconds(y, mo, d, h, mi, se);
  return local < 0 ? -1 : local - offset;
}

std::vector<PodClaim> pod_claims(const json& pod) {
  std::vector<PodClaim> out;
  const json& claims = field(field(pod, "spec"), "resourceClaims");
  if (!claims.is_array()) return out;
  const json& statuses = field(field(pod, "status"), "resourceClaimStatuses");
  for (const json& c : claims) {
    PodClaim pc;
    pc.name = str(c, "name");
    pc.claim = str(c, "resourceClaimName");
    pc.template_name = str(c, "resourceClaimTemplateName");
    if (pc.claim.empty() && statuses.is_array()) {
      for (const json& st : statuses) {
        if (str(st, "name") == pc.name) pc.claim = str(st, "resourceClaimName");
      }
    }
    out.push_back(std::move(pc));
  }
  return out;
}

PodObject pod_from_json(const json& obj) {
  PodObject p;
  const json& meta = field(obj, "metadata");
  const json& spec = field(obj, "spec");
  p.uid = str(meta, "uid");
  p.ns = str(meta, "namespace");
  p.name = str(meta, "name");
  p.created = str(meta, "creationTimestamp");
  p.deleting = !field(meta, "deletionTimestamp").is_null();
  p.scheduler_name = str(spec, "schedulerName");
  p.node_name = str(spec, "nodeName");
  p.phase = str(field(obj, "status"), "phase");
  if (const json& conditions = field(field(obj, "status"), "conditions"); conditions.is_array()) {
    for (const json& c : conditions) {
      if (str(c, "type") == "PodScheduled" && str(c, "status") == "False") {
        p.unscheduled_reason = str(c, "reason");
      }
      if (str(c, "type") == "PodScheduled" && str(c, "status") == "True") {
        p.joined_s = rfc3339_seconds(str(c, "lastTransitionTime"));
      }
    }
  }
  if (const json& prio = field(spec, "priority"); prio.is_number_integer()) {
    const auto v = prio.get<std::int64_t>();
    p.priority = static_cast<int>(std::clamp<std::int64_t>(v, INT32_MIN, INT32_MAX));
  }
  p.preempt_never = str(spec, "preemptionPolicy") == "Never";
  p.started_s = rfc3339_seconds(str(field(obj, "status"), "startTime"));
  if (p.started_s >= 0) p.joined_s = p.started_s;
  if (p.started_s < 0) p.started_s = rfc3339_seconds(p.created);
  p.spec.name = p.key();
  const json& annotations = field(meta, "annotations");
  p.gpus = gpu_list(str(annotations, kGpusAnnotation));
  if (const std::string t = str(annotations, workload::kThroughputAnnotation); !t.empty()) {
    p.throughput = workload::parse_throughput_annotation(t);
  }
  p.queue = str(field(meta, "labels"), kQueueLabel);
  // The upstream gang API (v1.37, GenericWorkload) first: spec.schedulingGroup.podGroupName names
  // a scheduling.k8s.io PodGroup of the pod's namespace.
  if (const std::string u = str(field(spec, "schedulingGroup"), "podGroupName"); !u.empty()) {
    p.gang = p.ns + "/" + u;
  } else if (const std::string g = str(field(meta, "labels"), kPodGroupLabel); !g.empty()) {
    p.gang = p.ns + "/" + g;
  } else if (const std::string v = str(annotations, kGroupNameAnnotation); !v.empty()) {
    p.gang = p.ns + "/" + v;
  }
  for (const json& gate :
       field(spec, "schedulingGates").is_array() ? field(spec, "schedulingGates") : json::array()) {
    const std::string name = str(gate, "name");
    p.scheduling_gates.push_back(name.empty() ? "(unnamed)" : name);
  }
  try {
    read_request(obj, p);
  } catch (const BadPod& e) {
    p.error = e.what();
  }
  p.claims = pod_claims(obj);
  if (p.spec.gpu_count > 0) p.gpu_resources = gpu_resource_asks(obj);
  p.extended_claim = extended_claim_name(obj);
  UnevaluatedFields unevaluated = unevaluated_fields(obj);
  if (!unevaluated.required.empty()) p.unevaluated = std::move(unevaluated.required.front());
  p.ignored_preferences = std::move(unevaluated.preferred);
  return p;
}

std::string now_rfc3339() { return base::utc_now_rfc3339(); }

}  // namespace gpuorch::k8s

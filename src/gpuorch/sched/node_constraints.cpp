#include "gpuorch/sched/node_constraints.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gpuorch::sched {
namespace {

const std::string* label(const cluster::NodeSpec& node, std::string_view key) {
  for (const auto& [k, v] : node.labels) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::optional<std::int64_t> parse_int(std::string_view s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

bool contains(const std::vector<std::string>& values, const std::string& v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

// One requirement against a value that may be absent (a label the node lacks).
bool satisfied(const workload::NodeSelectorRequirement& r, const std::string* value) {
  using workload::SelectorOp;
  switch (r.op) {
    case SelectorOp::kIn:
      return value != nullptr && contains(r.values, *value);
    case SelectorOp::kNotIn:
      return value == nullptr || !contains(r.values, *value);
    case SelectorOp::kExists:
      return value != nullptr;
    case SelectorOp::kDoesNotExist:
      return value == nullptr;
    case SelectorOp::kGt:
    case SelectorOp::kLt: {
      // As the API defines them: exactly one integer value, compared with the label's integer.
      if (value == nullptr || r.values.size() != 1) return false;
      const auto have = parse_int(*value);
      const auto want = parse_int(r.values.front());
      if (!have || !want) return false;
      return r.op == SelectorOp::kGt ? *have > *want : *have < *want;
    }
  }
  return false;
}

bool hard_effect(const std::string& effect) {
  return effect == "NoSchedule" || effect == "NoExecute";
}

// The taint kube-scheduler's NodeUnschedulable plugin treats a cordoned node as having.
const cluster::Taint kUnschedulableTaint{"node.kubernetes.io/unschedulable", "", "NoSchedule"};

bool tolerated(const workload::NodeConstraints& pod, const cluster::Taint& taint) {
  return std::any_of(pod.tolerations.begin(), pod.tolerations.end(),
                     [&taint](const workload::Toleration& t) { return tolerates(t, taint); });
}

}  // namespace

bool matches(const cluster::NodeSpec& node, const workload::NodeSelectorTerm& term) {
  // A term with no requirements selects nothing (the API's rule for an empty term).
  if (term.match_expressions.empty() && term.match_fields.empty()) return false;
  for (const auto& r : term.match_expressions) {
    if (!satisfied(r, label(node, r.key))) return false;
  }
  for (const auto& r : term.match_fields) {
    if (r.key != "metadata.name" || !satisfied(r, &node.name)) return false;
  }
  return true;
}

bool tolerates(const workload::Toleration& t, const cluster::Taint& taint) {
  if (!t.effect.empty() && t.effect != taint.effect) return false;
  if (t.exists) return t.key.empty() || t.key == taint.key;
  return t.key == taint.key && t.value == taint.value;
}

bool node_constrains(const cluster::NodeSpec& node) {
  return node.unschedulable ||
         std::any_of(node.taints.begin(), node.taints.end(),
                     [](const cluster::Taint& t) { return hard_effect(t.effect); });
}

bool tolerates_cordon(const cluster::NodeSpec& node, const workload::NodeConstraints& pod) {
  return !node.unschedulable || tolerated(pod, kUnschedulableTaint);
}

bool matches_affinity(const cluster::NodeSpec& node, const workload::NodeConstraints& pod) {
  if (!pod.node_names.empty() && !contains(pod.node_names, node.name)) return false;
  for (const auto& [key, value] : pod.node_selector) {
    const std::string* have = label(node, key);
    if (have == nullptr || *have != value) return false;
  }
  return pod.required_terms.empty() ||
         std::any_of(pod.required_terms.begin(), pod.required_terms.end(),
                     [&node](const workload::NodeSelectorTerm& t) { return matches(node, t); });
}

bool tolerates_taints(const cluster::NodeSpec& node, const workload::NodeConstraints& pod) {
  return std::none_of(node.taints.begin(), node.taints.end(), [&pod](const cluster::Taint& taint) {
    return hard_effect(taint.effect) && !tolerated(pod, taint);
  });
}

}  // namespace gpuorch::sched

#pragma once
// Where a pod may run, in Kubernetes' own terms: nodeSelector, required node affinity and
// tolerations. The scheduler core evaluates them (sched/node_constraints.hpp), so the simulator and
// the Kubernetes scheduler share one meaning.
#include <string>
#include <utility>
#include <vector>

namespace gpuorch::workload {

enum class SelectorOp { kIn, kNotIn, kExists, kDoesNotExist, kGt, kLt };

struct NodeSelectorRequirement {
  std::string key;
  SelectorOp op = SelectorOp::kIn;
  std::vector<std::string> values;
  bool operator==(const NodeSelectorRequirement&) const = default;
  auto operator<=>(const NodeSelectorRequirement&) const = default;
};

// A term matches when all its requirements do; matchFields only knows metadata.name.
struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;
  std::vector<NodeSelectorRequirement> match_fields;
  bool operator==(const NodeSelectorTerm&) const = default;
  auto operator<=>(const NodeSelectorTerm&) const = default;
};

struct Toleration {
  std::string key;      // empty with kExists: every taint
  bool exists = false;  // operator Exists (value ignored) rather than Equal
  std::string value;
  std::string effect;  // empty: every effect
  bool operator==(const Toleration&) const = default;
  auto operator<=>(const Toleration&) const = default;
};

struct NodeConstraints {
  std::vector<std::pair<std::string, std::string>> node_selector;  // every label must match
  // requiredDuringSchedulingIgnoredDuringExecution: the terms are ORed; none = no constraint.
  std::vector<NodeSelectorTerm> required_terms;
  std::vector<Toleration> tolerations;
  // Restricts the pod to these node names (a gang tried inside one topology domain); empty = any.
  std::vector<std::string> node_names;

  [[nodiscard]] bool empty() const {
    return node_selector.empty() && required_terms.empty() && tolerations.empty() &&
           node_names.empty();
  }
  bool operator==(const NodeConstraints&) const = default;
  auto operator<=>(const NodeConstraints&) const = default;
};

}  // namespace gpuorch::workload

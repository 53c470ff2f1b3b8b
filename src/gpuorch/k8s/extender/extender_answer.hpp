#pragma once
// The extender's filter and prioritize answers, written as JSON text directly. Each names every
// node kube-scheduler offered (FailedNodes, the HostPriorityList): at 5,000 nodes, building them
// as nlohmann::json values (a map node and two strings a node, then a dump) cost more than the
// decision itself (docs/benchmarks.md, "Extender latency").
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace gpuorch::k8s {

// ExtenderFilterResult: `keep` (empty: no node) in NodeNames, or, when the request carried whole
// Node objects (`items`, the Nodes form), the kept objects in Nodes.items; every other offered
// node with `why` in FailedNodes, or in FailedAndUnresolvableNodes when `unresolvable`.
struct FilterAnswer {
  std::vector<std::string_view> offered;
  const nlohmann::json* items = nullptr;
  std::string keep;
  bool keep_all = false;  // every offered node passes: the extender has no say (a DRA claim it
                          // does not evaluate; kube-scheduler's own plugins decide)
  std::string why;
  bool unresolvable = false;
  std::string error;
};
std::string filter_answer_text(const FilterAnswer& a);

// HostPriorityList: `top` for `chosen`, 0 for every other offered node.
std::string priority_list_text(const std::vector<std::string_view>& offered,
                               std::string_view chosen, int top);

// `s` as a JSON string, quotes included.
void append_json_string(std::string& out, std::string_view s);

}  // namespace gpuorch::k8s

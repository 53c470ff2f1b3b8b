#pragma once
// An ExtenderArgs with its NodeNames taken out before the JSON parse. With nodeCacheCapable the
// names are nearly all of a filter or prioritize request (100 KB at 5,000 nodes), and nlohmann's
// parser spent more on them (a string and a value each) than the core spent deciding
// (docs/benchmarks.md, "Extender latency"). Node names are DNS subdomains, so a plain scan reads
// them; anything else goes to the full parse.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuorch::k8s {

struct SplitArgs {
  std::string rest;                     // the body with NodeNames' array emptied: `[]`
  std::vector<std::string_view> names;  // views into the body
};

// nullopt unless the body is a JSON object with exactly one top-level member named NodeNames (in
// any case, as Go's decoder matches it) whose value is an array of plain strings (printable
// ASCII, no escapes); the caller then parses the whole body as it is.
std::optional<SplitArgs> split_node_names(std::string_view body);

}  // namespace gpuorch::k8s

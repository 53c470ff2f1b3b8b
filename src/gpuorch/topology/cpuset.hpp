#pragma once
// CPU and NUMA id sets in the kernel's list syntax ("0-55,112-167"), the form people compare with
// `nvidia-smi topo -m`, numactl and taskset.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuorch::topology {

// Sorted, unique ids.
using IdSet = std::vector<int>;

// Parses "0-3,8,10-11"; nullopt on malformed text. An empty (or blank) text is an empty set.
std::optional<IdSet> parse_id_list(std::string_view text);
// Parses a sysfs hex mask ("000000ff,ffffffff"); nullopt on malformed text.
std::optional<IdSet> parse_id_mask(std::string_view text);
std::string format_id_list(const IdSet& ids);
IdSet intersect(const IdSet& a, const IdSet& b);

}  // namespace gpuorch::topology

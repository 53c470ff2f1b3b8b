#pragma once
// Kubernetes resource quantities ("500m", "4", "16Gi", "1.5", "1e3") in gpuorch's units, exactly:
// the number is kept as a decimal integer and scaled with integer arithmetic, so "0.1" is 100
// milli, never 99 or 101.
#include <cstdint>
#include <optional>
#include <string_view>

namespace gpuorch::k8s {

// CPU in milli, rounded up (as the API server rounds a request below 1m).
std::optional<std::int64_t> quantity_milli(std::string_view text);
// Memory in MiB: rounded up for a request, down for a capacity.
std::optional<std::int64_t> quantity_mib(std::string_view text, bool round_up);
// A count (GPUs, pods): the quantity must be a whole non-negative number.
std::optional<std::int64_t> quantity_count(std::string_view text);

}  // namespace gpuorch::k8s

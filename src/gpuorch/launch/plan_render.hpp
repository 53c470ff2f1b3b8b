#pragma once
// `gpuorch launch --dry-run`: the plan as a table (one row per local rank) or as JSON.
#include <nlohmann/json.hpp>
#include <string>

#include "gpuorch/launch/plan.hpp"

namespace gpuorch::launch {

inline constexpr const char* kPlanSchema = "gpuorch.launch-plan/v1";

std::string render_plan_table(const Plan& plan);
nlohmann::ordered_json plan_json(const Plan& plan);

}  // namespace gpuorch::launch

#include "gpuorch/k8s/mirror/gang_check.hpp"

#include <fmt/format.h>

#include "gpuorch/k8s/mirror/unevaluated_fields.hpp"

namespace gpuorch::k8s {

GangCheck check_gang(const std::string& gang, const PodGroup* group, int bound,
                     const std::vector<PodObject>& pending) {
  if (group == nullptr) {
    return {GangHold::kNoGroup,
            fmt::format("gang {}: PodGroup {} does not exist (scheduling.x-k8s.io/v1alpha1, or "
                        "scheduling.k8s.io/v1beta1 for spec.schedulingGroup); waiting for it",
                        gang, gang)};
  }
  if (!group->error.empty()) {
    return {GangHold::kMalformed,
            fmt::format("gang {}: PodGroup {} is malformed: {}", gang, gang, group->error)};
  }
  for (const auto& p : pending) {
    if (!p.error.empty()) {
      return {GangHold::kMemberRefused,
              fmt::format("gang {}: member {} cannot be placed: {}", gang, p.key(), p.error)};
    }
    if (!p.unevaluated.empty()) {
      return {GangHold::kMemberRefused, fmt::format("gang {}: member {}: {}", gang, p.key(),
                                                    unevaluated_message(p.unevaluated))};
    }
  }
  const int present = bound + static_cast<int>(pending.size());
  if (present < group->min_member) {
    return {GangHold::kIncomplete,
            fmt::format("gang {}: {} of minMember {} pods exist ({} bound); waiting for the rest",
                        gang, present, group->min_member, bound)};
  }
  return {};
}

}  // namespace gpuorch::k8s

#pragma once
// Whether a gang's pending members may be tried at all, checked in one place for the scheduler and
// `doctor`: its group object exists and is sound, every member can be asked for, and at least
// minMember members exist. Both then try the placement themselves (the scheduler through its job
// layer, doctor on its snapshot); what stops a gang before that reads the same in both.
#include <string>
#include <vector>

#include "gpuorch/k8s/mirror/pod_group.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"

namespace gpuorch::k8s {

enum class GangHold {
  kNone,           // may be tried
  kNoGroup,        // no PodGroup of that name (yet): wait for it
  kMalformed,      // the PodGroup cannot be used
  kMemberRefused,  // a member's request cannot be placed, or names a field nobody evaluates
  kIncomplete,     // fewer than minMember members exist
};

struct GangCheck {
  GangHold hold = GangHold::kNone;
  std::string message;  // "gang ns/name: why", empty when kNone
};

// `group`: the gang's PodGroup, null when none is known. `bound`: members placed (or being
// bound); `pending`: the members waiting, in the order they are tried.
GangCheck check_gang(const std::string& gang, const PodGroup* group, int bound,
                     const std::vector<PodObject>& pending);

}  // namespace gpuorch::k8s

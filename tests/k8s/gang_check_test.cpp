// What stops a gang before any placement is tried, in the words both the scheduler and doctor
// use: no PodGroup, a malformed one, a member nobody can place, fewer than minMember members.
#include "gpuorch/k8s/mirror/gang_check.hpp"

#include <gtest/gtest.h>

namespace gpuorch::k8s {
namespace {

PodObject member(const std::string& name) {
  PodObject p;
  p.ns = "ml";
  p.name = name;
  p.uid = name;
  p.gang = "ml/g";
  return p;
}

PodGroup group(int min_member) {
  PodGroup g;
  g.key = "ml/g";
  g.min_member = min_member;
  return g;
}

TEST(GangCheck, EachHoldInTheOrderTheSchedulerChecksIt) {
  const std::vector<PodObject> two = {member("g-0"), member("g-1")};
  const GangCheck none = check_gang("ml/g", nullptr, 0, two);
  EXPECT_EQ(none.hold, GangHold::kNoGroup);
  EXPECT_NE(none.message.find("gang ml/g: PodGroup ml/g does not exist"), std::string::npos);

  PodGroup bad = group(2);
  bad.error = "spec.minMember 0 is not a whole number in [1, 100000]";
  EXPECT_EQ(check_gang("ml/g", &bad, 0, two).message,
            "gang ml/g: PodGroup ml/g is malformed: " + bad.error);

  // A refused member outranks missing members: it would never be placed even when all exist.
  std::vector<PodObject> refused = two;
  refused[1].error = "requests 0.5 nvidia.com/gpu";
  const PodGroup three = group(3);
  const GangCheck r = check_gang("ml/g", &three, 0, refused);
  EXPECT_EQ(r.hold, GangHold::kMemberRefused);
  EXPECT_EQ(r.message, "gang ml/g: member ml/g-1 cannot be placed: requests 0.5 nvidia.com/gpu");
  std::vector<PodObject> unevaluated = two;
  unevaluated[0].unevaluated = "spec.affinity.podAffinity";
  const GangCheck u = check_gang("ml/g", &three, 0, unevaluated);
  EXPECT_EQ(u.hold, GangHold::kMemberRefused);
  EXPECT_NE(u.message.find("gang ml/g: member ml/g-0: Unsupported: spec.affinity.podAffinity"),
            std::string::npos)
      << u.message;

  const GangCheck few = check_gang("ml/g", &three, 0, two);
  EXPECT_EQ(few.hold, GangHold::kIncomplete);
  EXPECT_EQ(few.message, "gang ml/g: 2 of minMember 3 pods exist (0 bound); waiting for the rest");
  // Bound members count toward minMember: a running gang's new pods are not held back.
  const GangCheck grown = check_gang("ml/g", &three, 1, two);
  EXPECT_EQ(grown.hold, GangHold::kNone);
  EXPECT_EQ(grown.message, "");
}

}  // namespace
}  // namespace gpuorch::k8s

// What the finished jobs of a model say about how much service a running one still needs: the
// mean excess over its attained service of those that held more, from its own model while enough
// of them did, then from every model's, then nothing.
#include "gpuorch/sched/jobs/service_history.hpp"

#include <gtest/gtest.h>

namespace gpuorch::sched::jobs {
namespace {

TEST(ServiceHistory, NothingBeforeEnoughJobsFinished) {
  ServiceHistory h(3);
  EXPECT_FALSE(h.expected_remaining("cifar10", 0).has_value());
  h.finished("cifar10", 100);
  h.finished("cifar10", 200);
  EXPECT_FALSE(h.expected_remaining("cifar10", 0).has_value());
  EXPECT_FALSE(h.expected_remaining_own("cifar10", 0).has_value());
  h.finished("cifar10", 300);
  ASSERT_TRUE(h.expected_remaining("cifar10", 0).has_value());
  EXPECT_DOUBLE_EQ(*h.expected_remaining("cifar10", 0), 200);
}

TEST(ServiceHistory, MeanExcessOfTheJobsThatHeldMore) {
  ServiceHistory h(2);
  for (const double s : {400.0, 100.0, 300.0, 200.0}) h.finished("bert", s);
  // Held 150: the jobs of 200, 300 and 400 held more; they needed 50, 150 and 250 more.
  EXPECT_DOUBLE_EQ(*h.expected_remaining("bert", 150), 150);
  // Held 250: 300 and 400 remain, 50 and 150 more.
  EXPECT_DOUBLE_EQ(*h.expected_remaining("bert", 250), 100);
  // Held 350: only one job held more, fewer than two, and no other model to stand in.
  EXPECT_FALSE(h.expected_remaining("bert", 350).has_value());
  // A job that held exactly a finished job's service is past it.
  EXPECT_DOUBLE_EQ(*h.expected_remaining("bert", 200), 150);
}

TEST(ServiceHistory, EveryModelStandsInForOneWithTooFewJobs) {
  ServiceHistory h(2);
  h.finished("ncf", 10);
  h.finished("ncf", 30);
  h.finished("imagenet", 1000);
  // imagenet has one finished job, so all three stand in: held 0, mean of 10, 30 and 1000.
  EXPECT_DOUBLE_EQ(*h.expected_remaining("imagenet", 0), (10 + 30 + 1000) / 3.0);
  EXPECT_FALSE(h.expected_remaining_own("imagenet", 0).has_value());
  // A model never seen is estimated the same way.
  EXPECT_DOUBLE_EQ(*h.expected_remaining("yolov3", 0), (10 + 30 + 1000) / 3.0);
  // Held 20: ncf alone has one job longer (30), every model has two (30, 1000).
  EXPECT_DOUBLE_EQ(*h.expected_remaining("ncf", 20), (10 + 980) / 2.0);
  EXPECT_EQ(h.size(), 3u);
}

}  // namespace
}  // namespace gpuorch::sched::jobs

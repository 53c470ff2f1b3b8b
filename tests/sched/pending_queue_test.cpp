// The core's queue order: priority first, then arrival, then key; re-adding keeps a pod's place.
#include "gpuorch/sched/pending_queue.hpp"

#include <gtest/gtest.h>

namespace gpuorch::sched {
namespace {

TEST(PendingQueue, PriorityThenArrivalThenKey) {
  PendingQueue q;
  q.push("late-high", 10, "2026-01-01T00:00:05Z");
  q.push("early-low", 0, "2026-01-01T00:00:01Z");
  q.push("early-high", 10, "2026-01-01T00:00:02Z");
  q.push("b-same", 0, "2026-01-01T00:00:03Z");
  q.push("a-same", 0, "2026-01-01T00:00:03Z");
  q.push("negative", -5, "2026-01-01T00:00:00Z");
  q.push("early-low", 99, "x");  // already queued: keeps its place and priority
  EXPECT_EQ(q.size(), 6U);
  std::vector<std::string> order;
  while (auto k = q.pop()) order.push_back(*k);
  EXPECT_EQ(order, (std::vector<std::string>{"early-high", "late-high", "early-low", "a-same",
                                             "b-same", "negative"}));
  EXPECT_TRUE(q.empty());
}

TEST(PendingQueue, EraseAnywhere) {
  PendingQueue q;
  q.push("a", 0, "1");
  q.push("b", 0, "2");
  q.push("c", 0, "3");
  EXPECT_TRUE(q.erase("b"));
  EXPECT_FALSE(q.erase("b"));
  EXPECT_FALSE(q.contains("b"));
  EXPECT_EQ(q.pop(), "a");
  q.push("b", 0, "2");  // back, in its arrival order
  EXPECT_EQ(q.pop(), "b");
  EXPECT_EQ(q.pop(), "c");
  EXPECT_EQ(q.pop(), std::nullopt);
}

}  // namespace
}  // namespace gpuorch::sched

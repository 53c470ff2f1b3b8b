// sched::Backoff: the per-pod wait after failures (1 s doubling to 10 s, as kube-scheduler), and
// the parked set that hands pods back only once their wait is over.
#include "gpuorch/sched/backoff.hpp"

#include <gtest/gtest.h>

namespace gpuorch::sched {
namespace {

using namespace std::chrono_literals;
using Clock = Backoff::Clock;

TEST(Backoff, DoublesFromTheInitialWaitUpToTheMaximum) {
  Backoff b(1s, 10s);
  const Clock::time_point t0{};
  std::vector<std::chrono::milliseconds> waits;
  for (int i = 0; i < 7; ++i) {
    waits.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(b.fail("p", t0) - t0));
  }
  EXPECT_EQ(waits, (std::vector<std::chrono::milliseconds>{1s, 2s, 4s, 8s, 10s, 10s, 10s}));
  EXPECT_EQ(b.failures("p"), 7);
  b.forget("p");
  EXPECT_EQ(b.failures("p"), 0);
  EXPECT_EQ(b.fail("p", t0) - t0, 1s) << "a success starts the count again";
}

TEST(Backoff, ManyFailuresNeverOverflow) {
  Backoff b(1s, 10s);
  const Clock::time_point t0{};
  for (int i = 0; i < 1000; ++i) b.fail("p", t0);
  EXPECT_EQ(b.ready_at("p") - t0, 10s);
}

TEST(Backoff, ParkedPodsComeBackOnlyWhenTheirWaitIsOver) {
  Backoff b(1s, 10s);
  const Clock::time_point t0{};
  b.fail("a", t0);
  b.fail("b", t0);
  b.fail("b", t0);  // waits 2 s
  b.park("b");
  b.park("a");
  b.park("never-failed");  // nothing to wait for: due at once
  EXPECT_EQ(b.due(t0), std::vector<std::string>{"never-failed"});
  EXPECT_TRUE(b.due(t0 + 999ms).empty());
  EXPECT_EQ(b.next_due(), t0 + 1s);
  EXPECT_EQ(b.due(t0 + 1s), std::vector<std::string>{"a"});
  EXPECT_TRUE(b.parked("b"));
  EXPECT_EQ(b.due(t0 + 5s), std::vector<std::string>{"b"});
  EXPECT_FALSE(b.parked("b"));
  EXPECT_EQ(b.parked_count(), 0U);
  EXPECT_FALSE(b.next_due().has_value());
}

TEST(Backoff, AFailureWhileParkedMovesTheWait) {
  Backoff b(1s, 10s);
  const Clock::time_point t0{};
  b.fail("a", t0);
  b.park("a");
  b.park("a");  // parking twice keeps one entry
  EXPECT_EQ(b.parked_count(), 1U);
  b.fail("a", t0 + 500ms);  // second failure: 2 s from then
  EXPECT_TRUE(b.due(t0 + 2s).empty());
  EXPECT_EQ(b.due(t0 + 2500ms), std::vector<std::string>{"a"});
  b.park("a");
  b.unpark("a");
  EXPECT_TRUE(b.due(t0 + 60s).empty());
}

}  // namespace
}  // namespace gpuorch::sched

// The NCCL id exchange on loopback: ranks as threads (a closed socket is what the kernel leaves
// when a process dies), every wait bounded.
#include "gpuorch/comm/peer_group.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace gpuorch::comm {
namespace {

using std::chrono::milliseconds;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const PeerError& e) {
    return e.what();
  }
  return "no error";
}

// Starts rank 0 on a free port and returns it with the port it listens on.
struct Root {
  std::promise<int> port_promise;
  std::future<std::unique_ptr<PeerGroup>> group;
  int port = 0;
  Root(int world, milliseconds timeout) {
    auto ready = port_promise.get_future();
    group = std::async(std::launch::async, [this, world, timeout] {
      return std::make_unique<PeerGroup>(0, world, "", 0, timeout,
                                         [this](int p) { port_promise.set_value(p); });
    });
    port = ready.get();
  }
};

TEST(PeerGroup, FourRanksGetTheIdAndSum) {
  constexpr int kWorld = 4;
  Root root(kWorld, milliseconds(10000));
  const std::string id(128, '\x7f');
  std::vector<std::future<std::pair<std::string, std::vector<double>>>> peers;
  for (int r = 1; r < kWorld; ++r) {
    peers.push_back(std::async(std::launch::async, [r, port = root.port] {
      PeerGroup g(r, kWorld, "localhost", port, milliseconds(10000));
      const std::string got = g.broadcast("");
      auto s = g.sum({static_cast<double>(r), 1.5});
      g.barrier();
      return std::make_pair(got, s);
    }));
  }
  auto g0 = root.group.get();
  EXPECT_EQ(g0->broadcast(id), id);
  EXPECT_EQ(g0->sum({0.0, 1.5}), (std::vector<double>{6.0, 6.0}));
  g0->barrier();
  for (auto& p : peers) {
    const auto [got, s] = p.get();
    EXPECT_EQ(got, id);
    EXPECT_EQ(s, (std::vector<double>{6.0, 6.0}));
  }
  EXPECT_EQ(g0->lost_peer(), "rank 1");  // the peers are gone now
}

TEST(PeerGroup, ARankThatNeverComesIsNamedAfterTheTimeout) {
  Root root(3, milliseconds(400));
  auto peer = std::async(std::launch::async, [port = root.port] {
    return error_of([&] { PeerGroup g(1, 3, "127.0.0.1", port, milliseconds(2000)); });
  });
  const auto start = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { root.group.get(); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_NE(e.find("rank 2 of 3: never connected"), std::string::npos) << e;
  EXPECT_NE(peer.get().find("closed its connection"), std::string::npos);
}

TEST(PeerGroup, NoRankZeroIsABoundedWait) {
  // A port nobody listens on: bind one, note it, close it.
  int port = 0;
  {
    std::promise<int> p;
    auto f = p.get_future();
    auto t = std::async(std::launch::async, [&] {
      return error_of([&] {
        PeerGroup g(0, 2, "", 0, milliseconds(50), [&](int bound) { p.set_value(bound); });
      });
    });
    port = f.get();
    t.get();
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { PeerGroup g(1, 2, "127.0.0.1", port, milliseconds(300)); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_NE(e.find("not reachable within 0.3 s"), std::string::npos) << e;
}

TEST(PeerGroup, APeerDyingMidRunIsNamedNotAHang) {
  Root root(3, milliseconds(5000));
  std::atomic<bool> rank1_gone{false};
  auto p1 = std::async(std::launch::async, [port = root.port, &rank1_gone] {
    PeerGroup g(1, 3, "127.0.0.1", port, milliseconds(5000));
    g.broadcast("");
    rank1_gone = true;  // leaves without joining the sum: its socket closes, as in a crash
  });
  auto p2 = std::async(std::launch::async, [port = root.port] {
    PeerGroup g(2, 3, "127.0.0.1", port, milliseconds(5000));
    g.broadcast("");
    return error_of([&] { g.sum({1.0}); });
  });
  auto g0 = root.group.get();
  g0->broadcast("id");
  p1.get();
  EXPECT_EQ(g0->lost_peer(), "rank 1");
  const std::string e = error_of([&] { g0->sum({1.0}); });
  EXPECT_EQ(e, "rank 1 closed its connection (exited or died)");
  g0.reset();  // rank 0 leaves: rank 2 learns at once
  EXPECT_EQ(p2.get(), "rank 0 closed its connection (exited or died)");
}

TEST(PeerGroup, MismatchedWorldSizeIsRefusedWithOneLine) {
  Root root(2, milliseconds(3000));
  const std::string peer =
      error_of([&] { PeerGroup g(1, 3, "127.0.0.1", root.port, milliseconds(3000)); });
  EXPECT_EQ(peer, "rank 1 has WORLD_SIZE 3, rank 0 has 2");
  EXPECT_EQ(error_of([&] { root.group.get(); }), "rank 1 has WORLD_SIZE 3, rank 0 has 2");
}

TEST(PeerWatchdog, FiresOnALostPeerAndOnNoProgress) {
  Root root(2, milliseconds(5000));
  std::promise<void> leave;
  auto p1 = std::async(std::launch::async, [port = root.port, f = leave.get_future()]() mutable {
    PeerGroup g(1, 2, "127.0.0.1", port, milliseconds(5000));
    f.wait();
  });
  auto g0 = root.group.get();
  std::promise<std::string> fired;
  auto fired_f = fired.get_future();
  {
    PeerWatchdog w(*g0, milliseconds(10000),
                   [&](const std::string& what) { fired.set_value(what); });
    w.arm("NCCL init");
    leave.set_value();
    p1.get();
    ASSERT_EQ(fired_f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
    EXPECT_EQ(fired_f.get(), "rank 1 left during NCCL init (exited or died)");
  }
  PeerGroup alone(0, 1, "", 0, milliseconds(10));
  std::promise<std::string> stalled;
  auto stalled_f = stalled.get_future();
  PeerWatchdog w(alone, milliseconds(200),
                 [&](const std::string& what) { stalled.set_value(what); });
  w.arm("all_reduce 8 GiB");
  ASSERT_EQ(stalled_f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(stalled_f.get(),
            "no progress for 0.2 s during all_reduce 8 GiB (a peer or a GPU hung?)");
}

}  // namespace
}  // namespace gpuorch::comm

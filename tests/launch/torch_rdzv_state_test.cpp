// The pickle reader/writer and PyTorch's rendezvous state, on pickles /usr/bin/python3 wrote
// (PyTorch 1.13's classes; the 2.x form with `addr`, aware times and a redundancy list) and on
// broken ones: every cut and every flipped byte is one PickleError, never a crash.
#include "gpuorch/launch/torch_rdzv_state.hpp"

#include <gtest/gtest.h>

#include "gpuorch/launch/py_pickle.hpp"
#include "support/test_support.hpp"

namespace gpuorch::launch {
namespace {

using pickle::PickleError;

// 2025-12-02 10:53:18.295721 UTC, the time the fixtures hold.
constexpr UtcMicros kT = 1764672798295721;

std::string fixture_bytes(const std::string& name) {
  return test::read_text(test::fixture("launch/" + name));
}

TEST(TorchRdzvState, ReadsPyTorch1State) {
  const auto s = decode_torch_state(fixture_bytes("torch_state_1x.pickle"), torch2_dialect());
  EXPECT_EQ(s.round, 3);
  EXPECT_TRUE(s.complete);
  EXPECT_FALSE(s.closed);
  EXPECT_FALSE(s.deadline);
  const TorchNode a{"node-a.example", 1234, 0}, b{"node-b.example", 99, 1},
      c{"node-c.example", 7, 0};
  ASSERT_EQ(s.participants.size(), 2u);
  EXPECT_EQ(*s.rank_of(a), 0);
  EXPECT_EQ(*s.rank_of(b), 1);
  EXPECT_TRUE(s.waiting(c));
  ASSERT_EQ(s.last_heartbeats.size(), 3u);
  EXPECT_EQ(s.last_heartbeats[0].second, kT);
  EXPECT_EQ(s.last_heartbeats[2].second, kT + 2'000'005);
  EXPECT_EQ(s.dialect.node_field, "fqdn");  // what the bytes show, not the fallback
  EXPECT_FALSE(s.dialect.aware_times);
  EXPECT_FALSE(s.dialect.redundancy_list);
  EXPECT_EQ(a.text(), "node-a.example_1234_0");
}

TEST(TorchRdzvState, ReadsPyTorch2State) {
  const auto s = decode_torch_state(fixture_bytes("torch_state_2x.pickle"), torch1_dialect());
  EXPECT_EQ(s.round, 1);
  EXPECT_FALSE(s.complete);
  ASSERT_TRUE(s.deadline);
  EXPECT_EQ(*s.deadline, kT);
  EXPECT_EQ(s.dialect.node_field, "addr");
  EXPECT_TRUE(s.dialect.aware_times);
  EXPECT_TRUE(s.dialect.redundancy_list);
  ASSERT_EQ(s.redundancy_list.size(), 1u);
  EXPECT_EQ(s.redundancy_list[0], (TorchNode{"10.0.0.2", 99, 1}));
  // The second heartbeat was written at UTC+2: 3 s later in local time is 2 h earlier in UTC.
  EXPECT_EQ(s.last_heartbeats[1].second, kT + 3'000'000 - 7'200'000'000);
}

TEST(TorchRdzvState, EmptyStateKeepsTheFallbackDialect) {
  auto s = decode_torch_state(fixture_bytes("torch_state_1x_open.pickle"), torch2_dialect());
  EXPECT_EQ(s.dialect.node_field, "fqdn");
  EXPECT_EQ(*s.deadline, kT);
}

TEST(TorchRdzvState, WritesWhatItReads) {
  for (const auto* name :
       {"torch_state_1x.pickle", "torch_state_2x.pickle", "torch_state_1x_open.pickle"}) {
    const auto s = decode_torch_state(fixture_bytes(name), torch2_dialect());
    const auto again = decode_torch_state(encode_torch_state(s), torch2_dialect());
    EXPECT_EQ(again.round, s.round) << name;
    EXPECT_EQ(again.complete, s.complete) << name;
    EXPECT_EQ(again.deadline, s.deadline) << name;
    EXPECT_EQ(again.participants, s.participants) << name;
    EXPECT_EQ(again.wait_list, s.wait_list) << name;
    EXPECT_EQ(again.redundancy_list, s.redundancy_list) << name;
    EXPECT_EQ(again.last_heartbeats, s.last_heartbeats) << name;
    EXPECT_EQ(again.dialect.node_field, s.dialect.node_field) << name;
    EXPECT_EQ(again.dialect.aware_times, s.dialect.aware_times) << name;
  }
  // Times before 1970 and integers beyond 32 bits survive too.
  TorchRdzvState s;
  s.round = 5'000'000'000;
  s.participants = {{{"h", -7, 1LL << 40}, 0}};
  s.last_heartbeats = {{{"h", -7, 1LL << 40}, -86'400'000'001}};
  s.dialect = torch1_dialect();
  const auto again = decode_torch_state(encode_torch_state(s), torch2_dialect());
  EXPECT_EQ(again.round, s.round);
  EXPECT_EQ(again.participants, s.participants);
  EXPECT_EQ(again.last_heartbeats, s.last_heartbeats);
}

TEST(TorchRdzvState, EveryCutAndFlipIsOneError) {
  const auto good = fixture_bytes("torch_state_2x.pickle");
  int errors = 0;
  for (std::size_t n = 0; n < good.size(); ++n) {
    try {
      decode_torch_state(good.substr(0, n), torch2_dialect());
    } catch (const PickleError&) {
      ++errors;
    }
  }
  EXPECT_EQ(errors, static_cast<int>(good.size()));
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (const int x : {0x01, 0x80, 0xff}) {
      auto bad = good;
      bad[i] = static_cast<char>(static_cast<unsigned char>(bad[i]) ^ x);
      try {
        decode_torch_state(bad, torch2_dialect());
      } catch (const PickleError&) {
      }
    }
  }
}

TEST(TorchRdzvState, RefusesWhatIsNotTheState) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"", "pickle byte 0: needs 1 more bytes, has 0"},
      {"N.",
       "rendezvous state: the state is a None, not a "
       "torch.distributed.elastic.rendezvous.dynamic_rendezvous._RendezvousState"},
      {std::string("\x80\x04]\x94h\x00"
                   "a.",
                   8),
       "rendezvous state: the state is a list, not a "
       "torch.distributed.elastic.rendezvous.dynamic_rendezvous._RendezvousState"},
      {"h\x05.", "pickle byte 0: memo entry 5 was never stored"},
      {"cos\nsystem\n(S'ls'\ntR.", "pickle byte 12: opcode 0x53 is not one this reader takes"},
      {"\x8a\x09\x01\x01\x01\x01\x01\x01\x01\x01\x01.",
       "pickle byte 0: an integer of 9 bytes (at most 8 here)"},
      {"X\xff\xff\xff\xff", "pickle byte 0: needs 4294967295 more bytes, has 0"},
      {"NN.", "pickle byte 2: STOP with a stack of 2 values"},
      {"u.", "pickle byte 0: no MARK"},
  };
  for (const auto& [bytes, message] : cases) {
    try {
      decode_torch_state(bytes, torch2_dialect());
      ADD_FAILURE() << "accepted: " << message;
    } catch (const PickleError& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
}

}  // namespace
}  // namespace gpuorch::launch

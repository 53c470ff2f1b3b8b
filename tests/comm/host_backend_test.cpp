// The host backend of gpuorch bench inside one process: ranks as threads, each with its own Gloo
// context over TCP on loopback and the rendezvous through the TCP store. Every collective, every
// element type and every reduction must come out exact; the TCP store must keep its promises.
#include "gpuorch/comm/host_backend.hpp"

#include <gtest/gtest.h>

#include <array>
#include <climits>
#include <cmath>
#include <string>
#include <thread>

#include "gpuorch/comm/expected.hpp"
#include "gpuorch/comm/host_elements.hpp"
#include "gpuorch/comm/tcp_store.hpp"

namespace gpuorch::comm {
namespace {

using namespace std::chrono_literals;

struct RankResult {
  std::vector<Row> rows;
  std::string error;
};

// Runs `o` as `n` ranks (threads) and returns each rank's rows or error.
std::vector<RankResult> run_ranks(const Options& o, int n, const host::Faults& f = {}) {
  TcpStoreServer store("127.0.0.1", 0);
  std::vector<RankResult> out(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      host::Endpoint e;
      e.rank = r;
      e.world = n;
      e.master_addr = "127.0.0.1";
      e.master_port = store.port();
      e.agent_store = true;
      e.timeout = 20s;
      auto& mine = out[static_cast<std::size_t>(r)];
      try {
        mine.rows = host::run_host(
            o, e, f, [](const RunInfo&) {}, [](const Row&) {});
      } catch (const std::exception& ex) {
        mine.error = ex.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

Options small(Collective c, std::string_view type, int n) {
  Options o;
  o.collective = c;
  o.type = *host::parse_type(type);
  o.min_bytes = 64;
  o.max_bytes = 4096;
  o.step_factor = 64;  // 64 and 4096 bytes
  o.iters = 1;
  o.warmup = 1;
  o.check = 1;
  o.root = n - 1;  // a root other than 0
  o.ranks = n;
  return o;
}

// Every rank saw the same rows, each checked and exact.
void expect_exact(const std::vector<RankResult>& res, const Options& o, const std::string& what) {
  for (std::size_t r = 0; r < res.size(); ++r) {
    ASSERT_EQ(res[r].error, "") << what << " rank " << r;
    ASSERT_EQ(res[r].rows.size(), 2u) << what;
    for (const auto& row : res[r].rows) {
      EXPECT_EQ(row.out_of_place.wrong, 0) << what << " size " << row.size.bytes;
      EXPECT_EQ(row.in_place.has_value(), has_in_place(o.collective)) << what;
      if (row.in_place) {
        EXPECT_EQ(row.in_place->wrong, 0) << what << " in place";
      }
      EXPECT_GT(row.out_of_place.time_us, 0) << what;
      EXPECT_DOUBLE_EQ(row.out_of_place.busbw,
                       row.out_of_place.algbw * busbw_factor(o.collective, (int)res.size()));
    }
  }
}

class EveryCollective : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(EveryCollective, EveryTypeExact) {
  const auto& [n, name] = GetParam();
  const auto c = *parse_collective(name);
  for (const char* type :
       {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double"}) {
    const Options o = small(c, type, n);
    expect_exact(run_ranks(o, n), o, name + " " + type + " x" + std::to_string(n));
  }
}

INSTANTIATE_TEST_SUITE_P(HostBackend, EveryCollective,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values("all_reduce", "all_gather",
                                                              "reduce_scatter", "broadcast",
                                                              "reduce", "alltoall", "sendrecv")),
                         [](const auto& p) {
                           return std::get<1>(p.param) + "_" + std::to_string(std::get<0>(p.param));
                         });

TEST(HostBackend, EveryReductionExact) {
  for (const char* c : {"all_reduce", "reduce_scatter", "reduce"}) {
    for (const char* op : {"sum", "prod", "max", "min", "avg"}) {
      for (const char* type : {"int32", "half"}) {
        Options o = small(*parse_collective(c), type, 4);
        o.op = *parse_op(op);
        if (o.op.name == "avg" && !o.type.floating) continue;
        expect_exact(run_ranks(o, 4), o, std::string(c) + " " + op + " " + type);
      }
    }
    // 3 ranks: Gloo's reduce-scatter across binary blocks, uneven ring chunks.
    const Options o = small(*parse_collective(c), "float", 3);
    expect_exact(run_ranks(o, 3), o, std::string(c) + " x3");
  }
}

TEST(HostBackend, PlantedWrongValueIsCounted) {
  Options o = small(Collective::all_reduce, "float", 2);
  o.check = 2;
  host::Faults f;
  f.corrupt_rank = 1;
  f.corrupt_index = 3;
  const auto res = run_ranks(o, 2, f);
  for (const auto& r : res) {
    ASSERT_EQ(r.error, "");
    for (const auto& row : r.rows) {
      EXPECT_EQ(row.out_of_place.wrong, 2);  // one per check iteration, summed over ranks
      EXPECT_EQ(row.in_place->wrong, 2);
    }
  }
  o.check = 0;
  const auto unchecked = run_ranks(o, 2, f);
  for (const auto& row : unchecked[0].rows) EXPECT_EQ(row.out_of_place.wrong, -1);
}

TEST(HostBackend, MissingPeerTimesOut) {
  Options o = small(Collective::all_reduce, "float", 2);
  TcpStoreServer store("127.0.0.1", 0);
  host::Endpoint e;
  e.world = 2;
  e.master_addr = "127.0.0.1";
  e.master_port = store.port();
  e.agent_store = true;
  e.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(host::run_host(
                   o, e, {}, [](const RunInfo&) {}, [](const Row&) {}),
               host::PeerError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(HostElements, SignedIntegersWrapInsteadOfOverflowing) {
  EXPECT_EQ((host::combine<std::int32_t, host::Reduction::sum>(INT32_MAX, 1)), INT32_MIN);
  EXPECT_EQ((host::combine<std::int64_t, host::Reduction::prod>(INT64_MAX, 2)), -2);
  EXPECT_EQ((host::combine<std::int8_t, host::Reduction::sum>(127, 1)), -128);
  EXPECT_EQ((host::combine<std::uint8_t, host::Reduction::max>(3, 200)), 200);
  const auto h = host::combine<host::Half, host::Reduction::sum>(host::from_double<host::Half>(1.5),
                                                                 host::from_double<host::Half>(2));
  EXPECT_EQ(host::to_double(h), 3.5);
}

TEST(HostElements, HalfConversionsRoundToNearestEven) {
  const auto bits = [](float f) { return host::float_to_half(f).bits; };
  EXPECT_EQ(bits(0.0f), 0x0000);
  EXPECT_EQ(bits(-0.0f), 0x8000);
  EXPECT_EQ(bits(1.0f), 0x3c00);
  EXPECT_EQ(bits(4.0f), 0x4400);
  EXPECT_EQ(bits(-2.5f), 0xc100);
  EXPECT_EQ(bits(65504.0f), 0x7bff);                      // largest finite
  EXPECT_EQ(bits(65520.0f), 0x7c00);                      // rounds to inf
  EXPECT_EQ(bits(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(bits(std::ldexp(1.0f, -25)), 0x0000);         // a tie: to even (zero)
  EXPECT_EQ(bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_EQ(bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  for (std::uint32_t h = 0; h < 0x10000; ++h) {  // every finite half survives the round trip
    const host::Half x{static_cast<std::uint16_t>(h)};
    if ((h & 0x7c00) == 0x7c00) continue;
    EXPECT_EQ(host::float_to_half(host::half_to_float(x)).bits, h);
  }
}

TEST(HostElements, TypesOfTheHostBackend) {
  EXPECT_EQ(host::parse_type("half")->bytes, 2u);
  EXPECT_EQ(host::parse_type("float16")->name, "half");
  EXPECT_EQ(host::parse_type("float")->bytes, 4u);
  EXPECT_FALSE(host::parse_type("bfloat16"));
  EXPECT_FALSE(parse_type("half"));  // the GPU backend does not offer it
}

TEST(Expected, BlocksOfEachCollective) {
  Options o;
  o.collective = Collective::alltoall;
  EXPECT_EQ(element_counts(o.collective, 5, 4).send, 20u);
  // alltoall: block 2 of rank 1 is block 1 of rank 2.
  EXPECT_EQ(expected_value(o, 4, 1, 5, 2 * 5 + 3), input_value(o, 2, 1 * 5 + 3));
  o.collective = Collective::sendrecv;
  EXPECT_EQ(expected_value(o, 4, 0, 5, 1), input_value(o, 3, 1));
  o.collective = Collective::reduce;
  o.root = 2;
  EXPECT_FALSE(has_output(o, 1));
  EXPECT_TRUE(has_output(o, 2));
}

TEST(TcpStore, SetGetAddWaitCheck) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStoreClient a("127.0.0.1", server.port(), 2s);
  TcpStoreClient b("127.0.0.1", server.port(), 2s);
  std::thread later([&] {
    std::this_thread::sleep_for(50ms);
    a.set("k", {'v', '1'});
  });
  EXPECT_EQ(b.get("k"), (std::vector<char>{'v', '1'}));  // waits for the other client's set
  later.join();
  EXPECT_TRUE(b.check({"k"}));
  EXPECT_FALSE(b.check({"k", "absent"}));
  EXPECT_EQ(a.add("n", 2), 2);
  EXPECT_EQ(b.add("n", 5), 7);
  a.set("empty", {});
  EXPECT_EQ(b.get("empty"), std::vector<char>{});
}

TEST(TcpStore, WaitAndConnectAreBounded) {
  TcpStoreServer server("127.0.0.1", 0);
  TcpStoreClient c("127.0.0.1", server.port(), 2s);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(c.wait({"never"}, 200ms), StoreError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_THROW(TcpStoreClient("127.0.0.1", 1, 200ms), StoreError);  // nobody listens on 1
}

TEST(TcpStore, PortInUseIsAnError) {
  TcpStoreServer server("127.0.0.1", 0);
  EXPECT_THROW(TcpStoreServer("127.0.0.1", server.port()), StoreError);
}

}  // namespace
}  // namespace gpuorch::comm

// The host backend of gpuorch bench inside one process: ranks as threads, each with its own Gloo
// context over TCP on loopback and the rendezvous through the TCP store. Every collective, every
// element type and every reduction must come out exact; the TCP store must keep its promises.
#include "gpuorch/comm/host_backend.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <climits>
#include <cmath>
#include <cstring>
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
      ASSERT_TRUE(row.in_place.has_value()) << what;  // timed in place always, as nccl-tests
      EXPECT_EQ(row.in_place->wrong, checks_in_place(o.collective) ? 0 : -1) << what << " in place";
      EXPECT_GT(row.in_place->time_us, 0) << what;
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

// A raw TCP connection to ip:port, for bytes no well-behaved client sends; -1 when refused.
int raw_connect(const char* ip, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, ip, &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void raw_u64(std::string& out, std::uint64_t v) { out.append(reinterpret_cast<char*>(&v), 8); }
void raw_str(std::string& out, const std::string& s) {
  raw_u64(out, s.size());
  out += s;
}
std::string raw_validate() {
  std::string out(1, '\0');
  const std::uint32_t magic = 0x3C85F7CE;
  out.append(reinterpret_cast<const char*>(&magic), 4);
  return out;
}
std::string raw_set(const std::string& k, const std::string& v) {
  std::string out(1, '\1');
  raw_str(out, k);
  raw_str(out, v);
  return out;
}
std::string raw_add(const std::string& k, std::int64_t delta) {
  std::string out(1, '\4');
  raw_str(out, k);
  out.append(reinterpret_cast<char*>(&delta), 8);
  return out;
}

// Sends `bytes` on a fresh connection; true when the server then closes it within 10 s (a hang
// is what this guards against; 2 s was missed on two busy cores under the sanitizers).
bool server_hangs_up(int port, const std::string& bytes) {
  const int fd = raw_connect("127.0.0.1", port);
  if (fd < 0) return false;
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  bool closed = false;
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (!closed && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[64];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    closed = n == 0 || (n < 0 && errno == ECONNRESET);
  }
  ::close(fd);
  return closed;
}

TEST(TcpStore, BadRequestsCloseTheirConnectionAndTheServerGoesOn) {
  TcpStoreServer server("127.0.0.1", 0);
  const int port = server.port();
  // ADD to a value that is not a number, and ADD past INT64_MAX (stoll threw in the server).
  EXPECT_TRUE(server_hangs_up(port, raw_validate() + raw_set("k", "abc") + raw_add("k", 1)));
  EXPECT_TRUE(server_hangs_up(port, raw_validate() + raw_add("n", INT64_MAX) + raw_add("n", 1)));
  EXPECT_TRUE(server_hangs_up(port, raw_validate() + raw_add("m", INT64_MIN) + raw_add("m", -1)));
  EXPECT_TRUE(server_hangs_up(port, raw_validate() + raw_set("p", "12abc") + raw_add("p", 1)));
  // Lengths over the limits are refused at once, before their bytes are buffered.
  std::string huge_key(1, '\1');
  raw_u64(huge_key, kStoreMaxKeyBytes + 1);
  EXPECT_TRUE(server_hangs_up(port, raw_validate() + huge_key));
  std::string huge_value(1, '\1');
  raw_str(huge_value, "v");
  raw_u64(huge_value, std::uint64_t{1} << 62);
  EXPECT_TRUE(server_hangs_up(port, raw_validate() + huge_value));
  std::string many_keys(1, '\6');  // WAIT
  raw_u64(many_keys, kStoreMaxKeysPerQuery + 1);
  EXPECT_TRUE(server_hangs_up(port, raw_validate() + many_keys));
  std::string big_wait(1, '\6');  // each key within the limit, the request not
  raw_u64(big_wait, 1024);
  for (int i = 0; i < 1024 && big_wait.size() <= kStoreMaxRequestBytes; ++i) {
    raw_str(big_wait, std::string(kStoreMaxKeyBytes, 'k'));
  }
  EXPECT_TRUE(server_hangs_up(port, raw_validate() + big_wait));
  std::string legacy(1, '\0');  // PyTorch 1.13's SET of a key of 2^40 bytes
  raw_u64(legacy, std::uint64_t{1} << 40);
  EXPECT_TRUE(server_hangs_up(port, legacy));
  EXPECT_TRUE(server_hangs_up(port, raw_validate() + std::string(1, '\x63')));  // unknown query
  std::string wrong_magic(1, '\0');
  wrong_magic += "\x01\x02\x03\x04";
  EXPECT_TRUE(server_hangs_up(port, raw_validate() + wrong_magic));
  // Still serving, and what was stored before a bad request stays.
  TcpStoreClient c("127.0.0.1", port, 2s);
  EXPECT_EQ(c.get("k"), (std::vector<char>{'a', 'b', 'c'}));
  EXPECT_EQ(c.add("n", -1), INT64_MAX - 1);
  EXPECT_EQ(c.add("fresh", 3), 3);
  c.set("v", std::vector<char>(1 << 20, 'x'));
  EXPECT_EQ(c.get("v").size(), std::size_t{1} << 20);
}

TEST(TcpStore, ListensOnTheAddressItIsGivenOnly) {
  TcpStoreServer server("127.0.0.1", 0);
  EXPECT_EQ(server.address(), "127.0.0.1:" + std::to_string(server.port()));
  // 127.0.0.2 is this host too: a server on every interface would take it.
  const int other = raw_connect("127.0.0.2", server.port());
  EXPECT_LT(other, 0);
  if (other >= 0) ::close(other);
  const int fd = raw_connect("127.0.0.1", server.port());
  EXPECT_GE(fd, 0);
  if (fd >= 0) ::close(fd);
  TcpStoreServer any("", 0);
  EXPECT_EQ(any.address(), "*:" + std::to_string(any.port()));
  // 192.0.2.1 (TEST-NET-1) is no address of this host.
  EXPECT_THROW(TcpStoreServer("192.0.2.1", 0), StoreAddressError);
}

TEST(TcpStore, PortInUseIsAnError) {
  TcpStoreServer server("127.0.0.1", 0);
  EXPECT_THROW(TcpStoreServer("127.0.0.1", server.port()), StoreError);
}

}  // namespace
}  // namespace gpuorch::comm

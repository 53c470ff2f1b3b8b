// The limits every gpuorch HTTP server shares (telemetry/http_server.hpp), seen from raw sockets:
// what issue 30 did to the servers (a body too large, chunked or length-less; headers that never
// end; a body that trickles past the request's deadline; one peer holding every connection; a
// second server on a bound port) is answered with a status and a closed connection. Bounds on
// time are margins of 10x or more over the limits set here, not benchmarks.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gpuorch/telemetry/http_server.hpp"
#include "support/net.hpp"

namespace gpuorch::telemetry {
namespace {

using namespace std::chrono_literals;

// A server with one GET and one POST route under `limits`, serving until destroyed.
class Served {
 public:
  explicit Served(const HttpLimits& limits) {
    http_.Get("/ok", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    http_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(fmt::format("{} bytes\n", req.body.size()), "text/plain");
    });
    port_ = harden_and_bind(http_, "127.0.0.1", 0, limits);
    if (port_ > 0) thread_ = std::thread([this] { http_.listen_after_bind(); });
    while (port_ > 0 && !http_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~Served() {
    http_.stop();
    if (thread_.joinable()) thread_.join();
  }
  Served(const Served&) = delete;
  Served& operator=(const Served&) = delete;
  [[nodiscard]] int port() const { return port_; }

 private:
  httplib::Server http_;
  int port_ = -1;
  std::thread thread_;
};

void send_all(int fd, const std::string& s) {
  ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
}

// What the server sends until it closes the connection (or `wait` passes: then "(open)" ends it).
std::string read_until_closed(int fd, std::chrono::seconds wait = 20s) {
  timeval tv{static_cast<time_t>(wait.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return out;
    if (n < 0) return out + "(open)";
    out.append(buf, static_cast<std::size_t>(n));
  }
}

std::string status_line(const std::string& answer) { return answer.substr(0, answer.find('\r')); }

TEST(HttpLimits, BodyOverTheLimitIs413BeforeAByteOfItIsRead) {
  HttpLimits limits;
  limits.max_payload = 1024;
  limits.read_timeout = 60s;  // httplib read (skipped) the body first: it would wait this long
  Served s(limits);
  const int fd = test::open_loopback(s.port());
  // 8 MiB announced, none sent: the answer comes at once and the connection closes.
  send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\n\r\n");
  const std::string answer = read_until_closed(fd, 10s);
  ::close(fd);
  EXPECT_EQ(status_line(answer), "HTTP/1.1 413 Payload Too Large") << answer;
  EXPECT_NE(answer.find("request body of 8388608 bytes; at most 1024"), std::string::npos);
  // A client that writes its whole body before reading gets the answer, not a reset.
  httplib::Client c("127.0.0.1", s.port());
  const auto res = c.Post("/echo", std::string(1 << 20, 'x'), "text/plain");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 413);
}

TEST(HttpLimits, ChunkedAndLengthlessBodiesAre411) {
  Served s(HttpLimits{});
  for (const char* request :
       {"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\n\r\nhello",
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"}) {
    const int fd = test::open_loopback(s.port());
    send_all(fd, request);
    const std::string answer = read_until_closed(fd);
    ::close(fd);
    EXPECT_EQ(status_line(answer), "HTTP/1.1 411 Length Required") << request;
  }
  // A body with its length is read and answered on a connection kept open.
  const int fd = test::open_loopback(s.port());
  send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
  const std::string answer = read_until_closed(fd, 2s);
  ::close(fd);
  EXPECT_EQ(status_line(answer), "HTTP/1.1 200 OK");
  EXPECT_NE(answer.find("5 bytes"), std::string::npos);
  EXPECT_NE(answer.find("(open)"), std::string::npos) << "kept alive";
}

// A header line every 300 ms never trips the 1 s silence limit; the header deadline (1 s here)
// closes the connection all the same.
TEST(HttpLimits, HeadersThatTrickleAreClosedAtTheHeaderDeadline) {
  HttpLimits limits;
  limits.header_timeout = 1000ms;
  Served s(limits);
  const int fd = test::open_loopback(s.port());
  send_all(fd, "GET /ok HTTP/1.1\r\n");
  int sent = 0;
  for (; sent < 60; ++sent) {  // 18 s at most
    std::this_thread::sleep_for(300ms);
    const std::string line = fmt::format("X-Slow-{}: 1\r\n", sent);
    if (::send(fd, line.data(), line.size(), MSG_NOSIGNAL) < 0) break;
    char c;
    if (::recv(fd, &c, 1, MSG_DONTWAIT) >= 0 || errno == ECONNRESET) break;  // answered or closed
  }
  ::close(fd);
  EXPECT_LT(sent, 60) << "still open after 18 s of headers";
}

// The body arrives a byte every 300 ms: within the body deadline (60 s) and the silence limit,
// but not within the request's overall deadline (2 s).
TEST(HttpLimits, ABodyThatTricklesIsClosedAtTheRequestDeadline) {
  HttpLimits limits;
  limits.body_timeout = 60s;
  limits.request_timeout = 2000ms;
  Served s(limits);
  const int fd = test::open_loopback(s.port());
  send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
  int sent = 0;
  for (; sent < 60; ++sent) {
    std::this_thread::sleep_for(300ms);
    if (::send(fd, "x", 1, MSG_NOSIGNAL) < 0) break;
    char c;
    if (::recv(fd, &c, 1, MSG_DONTWAIT) >= 0 || errno == ECONNRESET) break;
  }
  ::close(fd);
  EXPECT_LT(sent, 60) << "still open after 18 s of body";
}

TEST(HttpLimits, HeadersOverTheSizeLimitEndTheConnection) {
  HttpLimits limits;
  limits.max_header_bytes = 16 * 1024;
  Served s(limits);
  const int fd = test::open_loopback(s.port());
  send_all(fd, "GET /ok HTTP/1.1\r\n");
  bool refused = false;
  const std::string line = "X-Filler: " + std::string(1000, 'a') + "\r\n";
  for (int i = 0; i < 1000 && !refused; ++i) {  // 1 MB of headers at most
    refused = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL) < 0;
    if (!refused && i % 50 == 49) {
      std::this_thread::sleep_for(50ms);
      char c;
      refused = ::recv(fd, &c, 1, MSG_DONTWAIT) >= 0 || errno == ECONNRESET;
    }
  }
  ::close(fd);
  EXPECT_TRUE(refused) << "1 MB of headers accepted";
}

// 4 connections from 127.0.0.2 are its share: the fifth is answered 503 and closed, while
// another address is served.
TEST(HttpLimits, ConnectionsAreCappedPerPeerAddress) {
  HttpLimits limits;
  limits.max_connections_per_peer = 4;
  limits.cap_loopback_peers = true;
  Served s(limits);
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(test::open_loopback(s.port(), 0, "127.0.0.2"));
    ASSERT_GE(held.back(), 0);
  }
  std::this_thread::sleep_for(200ms);  // accepted
  const int fifth = test::open_loopback(s.port(), 0, "127.0.0.2");
  ASSERT_GE(fifth, 0);
  const std::string refused = read_until_closed(fifth);
  ::close(fifth);
  EXPECT_EQ(status_line(refused), "HTTP/1.1 503 Service Unavailable") << refused;
  EXPECT_NE(refused.find("too many connections from 127.0.0.2 (at most 4)"), std::string::npos);
  httplib::Client other("127.0.0.1", s.port());
  const auto res = other.Get("/ok");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  for (const int fd : held) ::close(fd);
}

// On loopback every local process shares one address: by default the cap does not apply there.
TEST(HttpLimits, LoopbackPeersAreNotCappedByDefault) {
  HttpLimits limits;
  limits.max_connections_per_peer = 4;
  Served s(limits);
  std::vector<int> held;
  for (int i = 0; i < 20; ++i) held.push_back(test::open_loopback(s.port()));
  std::this_thread::sleep_for(200ms);
  httplib::Client c("127.0.0.1", s.port());
  const auto res = c.Get("/ok");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  for (const int fd : held) ::close(fd);
}

TEST(HttpLimits, AdmitRefusesBeforeTheBodyIsRead) {
  HttpLimits limits;
  limits.admit = [](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization") == "Bearer right") return true;
    res.status = 403;
    res.set_content("no\n", "text/plain");
    return false;
  };
  Served s(limits);
  const int fd = test::open_loopback(s.port());
  send_all(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n");
  const std::string answer = read_until_closed(fd);
  ::close(fd);
  EXPECT_EQ(status_line(answer), "HTTP/1.1 403 Forbidden") << answer;
  httplib::Client c("127.0.0.1", s.port());
  const auto res = c.Post("/echo", {{"Authorization", "Bearer right"}}, "abc", "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

// Bodies in flight share a budget: past it a body is refused (503) before it is read.
TEST(HttpLimits, BodiesInFlightShareABudget) {
  HttpLimits limits;
  limits.max_payload = 1 << 20;
  limits.max_body_bytes_in_flight = 1 << 20;
  limits.max_body_bytes_per_peer = 1 << 20;
  Served s(limits);
  const int slow = test::open_loopback(s.port());
  send_all(slow, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nabc");
  std::this_thread::sleep_for(200ms);  // its body is being read: 1 MB reserved
  httplib::Client c("127.0.0.1", s.port());
  const auto res = c.Post("/echo", std::string(100000, 'x'), "text/plain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  ::close(slow);
  std::this_thread::sleep_for(200ms);
  const auto again = c.Post("/echo", std::string(100000, 'x'), "text/plain");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
}

// A body over 1 MiB gives the heap back when it is done (malloc_trim, or ASan's purge: glibc's
// malloc_trim faulted under ASan); served again and again.
TEST(HttpLimits, LargeBodiesAreServedAndTheHeapGivenBack) {
  HttpLimits limits;
  limits.max_payload = 4 << 20;
  limits.max_body_bytes_in_flight = 8 << 20;
  limits.max_body_bytes_per_peer = 8 << 20;
  Served s(limits);
  httplib::Client c("127.0.0.1", s.port());
  for (int i = 0; i < 3; ++i) {
    const auto res = c.Post("/echo", std::string(3 << 20, 'x'), "text/plain");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, "3145728 bytes\n");
  }
}

// httplib set SO_REUSEPORT: a second server bound the same port and took half its connections.
TEST(HttpLimits, ASecondServerCannotBindAPortInUse) {
  Served first(HttpLimits{});
  ASSERT_GT(first.port(), 0);
  httplib::Server second;
  EXPECT_EQ(harden_and_bind(second, "127.0.0.1", first.port()), -1);
}

}  // namespace
}  // namespace gpuorch::telemetry

#include "gpuorch/comm/tcp_store.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "gpuorch/comm/tcp_store_state.hpp"
#include "gpuorch/comm/tcp_store_wire.hpp"

namespace gpuorch::comm {
namespace {

using namespace wire;

// One thread serves every connection, so a peer that sends requests and never reads the answers
// must not stall it: a send that makes no progress for this long gives that peer up. A peer that
// reads at all drains far faster (the kernel buffers megabytes per socket).
constexpr timeval kStoreSendTimeout{1, 0};

void send_fd(int fd, const std::vector<char>& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // Gone, or stuck past kStoreSendTimeout: half an answer is no answer, so end the
      // connection; the server drops it when poll reports the hang-up.
      ::shutdown(fd, SHUT_RDWR);
      return;
    }
    done += static_cast<std::size_t>(n);
  }
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// A listening socket on host:port: the addresses `host` names (an empty host: every interface).
int listen_on(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    throw StoreError(fmt::format("store {}:{}: {}", host, port, ::gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, ::freeaddrinfo);
  // Without a host, prefer the IPv6 wildcard: with IPV6_V6ONLY off it also takes IPv4 clients.
  // With one, its addresses in the resolver's order (the order its clients try them).
  std::vector<addrinfo*> order;
  for (addrinfo* a = res; a; a = a->ai_next) {
    if (a->ai_family == AF_INET6 && host.empty()) order.insert(order.begin(), a);
    if (a->ai_family == AF_INET || (a->ai_family == AF_INET6 && !host.empty())) {
      order.push_back(a);
    }
  }
  std::string why = "no address";
  bool not_local = !order.empty();
  for (addrinfo* a : order) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1, zero = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (a->ai_family == AF_INET6 && host.empty()) {
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    }
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) return fd;
    not_local = not_local && errno == EADDRNOTAVAIL;
    why = std::strerror(errno);
    ::close(fd);
  }
  const std::string what =
      fmt::format("store {}:{}: cannot listen: {}", host.empty() ? "*" : host, port, why);
  if (not_local) throw StoreAddressError(what);
  throw StoreError(what);
}

// What `fd` listens on: "127.0.0.1:29500", "[::1]:29500", "*:29500" for every interface.
std::string bound_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  char host[NI_MAXHOST] = {};
  char serv[NI_MAXSERV] = {};
  ::getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, serv, sizeof serv,
                NI_NUMERICHOST | NI_NUMERICSERV);
  const std::string h = host;
  if (h == "::" || h == "0.0.0.0") return fmt::format("*:{}", serv);
  if (h.find(':') != std::string::npos) return fmt::format("[{}]:{}", h, serv);
  return fmt::format("{}:{}", h, serv);
}

int bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& host, int port) {
  listen_fd_ = listen_on(host, port);
  port_ = bound_port(listen_fd_);
  address_ = bound_address(listen_fd_);
  if (::pipe2(wake_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw StoreError(fmt::format("store: pipe: {}", std::strerror(errno)));
  }
  thread_ = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  const char stop = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_[1], &stop, 1);
  if (thread_.joinable()) thread_.join();
  ::close(wake_[0]);
  ::close(wake_[1]);
  ::close(listen_fd_);
}

void TcpStoreServer::serve() {
  struct Conn {
    std::vector<char> in;
    StoreDialect dialect = StoreDialect::kUnknown;
  };
  std::map<int, Conn> conns;
  TcpStoreState store(send_fd);
  constexpr int kLogged = 10;  // connections closed for a bad request, logged; then silence
  int dropped_logged = 0;
  for (;;) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& [fd, c] : conns) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents) break;
    if (fds[1].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // not a busy loop
      } else if (fd >= 0 && conns.size() >= kStoreMaxConnections) {
        ::close(fd);  // full: the client sees the connection closed
      } else if (fd >= 0) {
        set_nodelay(fd);
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &kStoreSendTimeout, sizeof kStoreSendTimeout);
        conns[fd] = Conn{};
      }
    }
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      const int fd = fds[i].fd;
      char buf[65536];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      bool keep = n > 0 || (n < 0 && errno == EINTR);
      if (n > 0) {
        auto& c = conns[fd];
        std::string why;
        try {
          c.in.insert(c.in.end(), buf, buf + n);
          keep = store.handle(fd, c.in, c.dialect, why);
        } catch (const std::exception& ex) {  // out of memory: this connection only
          keep = false;
          why = ex.what();
        }
        if (!keep && dropped_logged < kLogged) {
          ++dropped_logged;
          fmt::print(stderr, "gpuorch: store {}: closed a connection: {}{}\n", address_, why,
                     dropped_logged == kLogged ? " (further ones are not logged)" : "");
        }
      }
      if (!keep) {
        store.drop(fd);
        ::close(fd);
        conns.erase(fd);
      }
    }
  }
  for (const auto& [fd, c] : conns) ::close(fd);
}

namespace {

// A connected socket to host:port, retried until `deadline` (the server may start after us).
int connect_until(const std::string& host, int port, const std::string& where,
                  std::chrono::steady_clock::time_point deadline,
                  std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string why;
  for (;;) {
    addrinfo* res = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) throw StoreError(fmt::format("store {}: {}", where, ::gai_strerror(rc)));
    int fd = -1;
    for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        why = std::strerror(errno);
        ::close(fd);
        fd = -1;
      }
    }
    ::freeaddrinfo(res);
    if (fd >= 0) {
      set_nodelay(fd);
      return fd;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw StoreError(fmt::format("store {}: cannot connect within {} s: {}", where,
                                   static_cast<double>(timeout.count()) / 1000.0, why));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

TcpStoreClient::TcpStoreClient(const std::string& host, int port, std::chrono::milliseconds timeout)
    : where_(fmt::format("{}:{}", host, port)), timeout_(timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  fd_ = connect_until(host, port, where_, deadline, timeout);
  // Which dialect the server speaks (PyTorch >= 2.0 wants VALIDATE first and drops or ignores a
  // connection that starts otherwise; 1.13 has no VALIDATE). VALIDATE + magic, then four
  // GETNUMKEYS: a validating server answers four counts. PyTorch 1.13 reads 00 as SET and the
  // next 8 bytes (magic, 07070707) as a key length of ~5e17, fails to allocate it and closes the
  // connection at once: then reconnect and speak its dialect.
  constexpr int kProbes = 4;
  std::vector<char> hello(1 + sizeof kValidateMagic + kProbes, static_cast<char>(kGetNumKeys));
  hello[0] = static_cast<char>(kValidate);
  std::memcpy(hello.data() + 1, &kValidateMagic, sizeof kValidateMagic);
  send_all(hello);
  std::array<std::int64_t, kProbes> counts{};
  try {
    recv_all(counts.data(), sizeof counts, deadline);
  } catch (const StoreError&) {
    if (fd_ >= 0) {  // no answer in time (recv_all closes fd_ when the server hung up)
      ::close(fd_);
      throw;
    }
    legacy_ = true;
    fd_ = connect_until(host, port, where_, deadline, timeout);
  }
}

char TcpStoreClient::code(std::uint8_t query) const {
  return static_cast<char>(legacy_ ? to_legacy(static_cast<Query>(query)) : query);
}

TcpStoreClient::~TcpStoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpStoreClient::send_all(const std::vector<char>& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw StoreError(fmt::format("store {}: send: {}", where_, std::strerror(errno)));
    done += static_cast<std::size_t>(n);
  }
}

void TcpStoreClient::recv_all(void* out, std::size_t n,
                              std::chrono::steady_clock::time_point deadline) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      throw StoreError(fmt::format("store {}: no answer within {} s", where_,
                                   static_cast<double>(timeout_.count()) / 1000.0));
    }
    pollfd pfd{fd_, POLLIN, 0};
    const int rc = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;  // the deadline check above ends it
    const ssize_t got = ::recv(fd_, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      ::close(fd_);
      fd_ = -1;
      throw StoreError(fmt::format("store {}: connection closed", where_));
    }
    p += got;
    n -= static_cast<std::size_t>(got);
  }
}

void TcpStoreClient::set(const std::string& key, const std::vector<char>& value) {
  std::vector<char> q{code(kSet)};
  put_str(q, key);
  put_bytes(q, value.data(), value.size());
  send_all(q);
}

std::vector<char> TcpStoreClient::get(const std::string& key) {
  wait({key}, timeout_);  // as c10d's client: WAIT, then GET
  std::vector<char> q{code(kGet)};
  put_str(q, key);
  send_all(q);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  std::uint64_t n = 0;
  recv_all(&n, sizeof n, deadline);
  std::vector<char> value(n);
  if (n > 0) recv_all(value.data(), n, deadline);
  return value;
}

std::vector<char> TcpStoreClient::compare_set(const std::string& key,
                                              const std::vector<char>& expected,
                                              const std::vector<char>& desired) {
  std::vector<char> q{code(kCompareSet)};
  put_str(q, key);
  put_bytes(q, expected.data(), expected.size());
  put_bytes(q, desired.data(), desired.size());
  send_all(q);
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  std::uint64_t n = 0;
  recv_all(&n, sizeof n, deadline);
  if (n > kStoreMaxValueBytes)
    throw StoreError(where_ + ": a COMPARE_SET answer of " + std::to_string(n) + " bytes");
  std::vector<char> value(n);
  if (n > 0) recv_all(value.data(), n, deadline);
  return value;
}

std::int64_t TcpStoreClient::add(const std::string& key, std::int64_t delta) {
  std::vector<char> q{code(kAdd)};
  put_str(q, key);
  q.insert(q.end(), reinterpret_cast<const char*>(&delta),
           reinterpret_cast<const char*>(&delta) + sizeof delta);
  send_all(q);
  std::int64_t now = 0;
  recv_all(&now, sizeof now, std::chrono::steady_clock::now() + timeout_);
  return now;
}

bool TcpStoreClient::check(const std::vector<std::string>& keys) {
  std::vector<char> q{code(kCheck)};
  put_u64(q, keys.size());
  for (const auto& k : keys) put_str(q, k);
  send_all(q);
  std::uint8_t answer = kNotReady;
  recv_all(&answer, 1, std::chrono::steady_clock::now() + timeout_);
  return answer == kReady;
}

void TcpStoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<char> q{code(kWait)};
  put_u64(q, keys.size());
  for (const auto& k : keys) put_str(q, k);
  send_all(q);
  std::uint8_t answer = 0;
  try {
    recv_all(&answer, 1, std::chrono::steady_clock::now() + timeout);
  } catch (const StoreError&) {
    // The pending WAIT would answer later, out of step: this connection is done for.
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw StoreError(fmt::format("store {}: timed out after {} s waiting for {}", where_,
                                 static_cast<double>(timeout.count()) / 1000.0,
                                 keys.empty() ? "" : keys.front()));
  }
}

}  // namespace gpuorch::comm

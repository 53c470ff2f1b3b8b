#include "gpuorch/comm/tcp_store.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

namespace gpuorch::comm {
namespace {

// c10d QueryType (TCPStoreBackend.hpp) and its answers; integers travel in host byte order.
enum Query : std::uint8_t {
  kValidate = 0,
  kSet = 1,
  kCompareSet = 2,
  kGet = 3,
  kAdd = 4,
  kCheck = 5,
  kWait = 6,
  kGetNumKeys = 7,
  kDeleteKey = 8,
};
constexpr std::uint32_t kValidateMagic = 0x3C85F7CE;
constexpr std::uint8_t kReady = 0, kNotReady = 1, kStopWaiting = 0;

// PyTorch up to 1.13 speaks the same format without VALIDATE: SET=0 .. GETNUMKEYS=6, then
// WATCH_KEY=7 (not served here), DELETE_KEY=8. Those codes, from and to the ones above.
constexpr std::uint8_t kLegacyWatchKey = 7;
int from_legacy(std::uint8_t q) {
  if (q < kLegacyWatchKey) return q + 1;
  return q == kDeleteKey ? kDeleteKey : -1;
}
std::uint8_t to_legacy(Query q) { return static_cast<std::uint8_t>(q == kDeleteKey ? q : q - 1); }

void put_u64(std::vector<char>& out, std::uint64_t v) {
  const auto* p = reinterpret_cast<const char*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}
void put_bytes(std::vector<char>& out, const char* data, std::size_t n) {
  put_u64(out, n);
  out.insert(out.end(), data, data + n);
}
void put_str(std::vector<char>& out, const std::string& s) { put_bytes(out, s.data(), s.size()); }

// Reads one request from a connection's buffered bytes; `ok` turns false when more bytes are
// needed, `bad` says why the request can never be served (a length over the limits).
class Reader {
 public:
  explicit Reader(const std::vector<char>& in) : in_(in) {}
  template <typename T>
  T value() {
    T v{};
    if (!need(sizeof v)) return v;
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string str(std::uint64_t limit, const char* what) {
    const auto n = value<std::uint64_t>();
    if (!ok) return {};
    if (n > limit) {
      fail(fmt::format("{} of {} bytes (at most {})", what, n, limit));
      return {};
    }
    if (!need(n)) return {};
    std::string s(in_.data() + at_, n);
    at_ += n;
    return s;
  }
  std::vector<std::string> strs() {
    const auto n = value<std::uint64_t>();
    if (ok && n > kStoreMaxKeysPerQuery) {
      fail(fmt::format("{} keys in one query (at most {})", n, kStoreMaxKeysPerQuery));
    }
    std::vector<std::string> v;
    for (std::uint64_t i = 0; ok && i < n; ++i) v.push_back(str(kStoreMaxKeyBytes, "a key"));
    return v;
  }
  void fail(std::string why) {
    ok = false;
    bad = std::move(why);
  }
  std::size_t used() const { return at_; }
  bool ok = true;
  std::string bad;  // non-empty: close the connection

 private:
  bool need(std::uint64_t n) {
    if (ok && in_.size() - at_ < n) ok = false;
    return ok;
  }
  const std::vector<char>& in_;
  std::size_t at_ = 0;
};

// A counter's value as ADD stores it (decimal, as c10d's std::to_string); nullopt when not one.
std::optional<std::int64_t> parse_counter(const std::string& s) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

void send_fd(int fd, const std::vector<char>& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the peer went away: its connection is dropped on the next read
    done += static_cast<std::size_t>(n);
  }
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct Waiter {
  int fd;
  std::vector<std::string> keys;
  std::optional<std::string> get;  // a GET of a missing key answers with the value, not a byte
};

// What a connection speaks, known from its first bytes: VALIDATE + magic (PyTorch >= 2.0, and
// gpuorch), else the format without VALIDATE (PyTorch <= 1.13, whose SET is 0: a SET whose key
// length starts with the magic's bytes, a key of 1 GB, would be taken for a VALIDATE).
enum class Dialect { kUnknown, kValidated, kLegacy };

// The store's state and one request at a time; lives in the server thread only. A request it
// cannot serve (unknown query, a length over the limits, ADD to a value that is not a counter or
// past the int64 range, the store full) closes its connection: the wire format has no error
// answer, and c10d's client takes a closed connection as the error.
class Store {
 public:
  // Handles every complete request in `in`; false (and `why`) when the connection must be closed.
  bool handle(int fd, std::vector<char>& in, Dialect& dialect, std::string& why) {
    for (;;) {
      if (dialect == Dialect::kUnknown) {
        if (in.empty() || (in[0] == kValidate && in.size() < 1 + sizeof kValidateMagic)) {
          return true;
        }
        std::uint32_t magic = 0;
        if (in[0] == kValidate) std::memcpy(&magic, in.data() + 1, sizeof magic);
        dialect = magic == kValidateMagic ? Dialect::kValidated : Dialect::kLegacy;
      }
      Reader r(in);
      const auto code = r.value<std::uint8_t>();
      if (!r.ok) return true;
      const int q = dialect == Dialect::kLegacy ? from_legacy(code) : code;
      std::vector<char> reply;
      switch (q) {
        case kValidate: {
          const auto magic = r.value<std::uint32_t>();
          if (r.ok && magic != kValidateMagic) r.fail("VALIDATE with a wrong magic");
          break;
        }
        case kSet: {
          auto key = r.str(kStoreMaxKeyBytes, "a key");
          auto value = r.str(kStoreMaxValueBytes, "a value");
          if (r.ok) set(std::move(key), std::move(value), r);
          break;
        }
        case kCompareSet: {
          auto key = r.str(kStoreMaxKeyBytes, "a key");
          const auto expected = r.str(kStoreMaxValueBytes, "a value");
          auto desired = r.str(kStoreMaxValueBytes, "a value");
          if (!r.ok) break;
          const auto it = kv_.find(key);
          if ((it == kv_.end() && expected.empty()) ||
              (it != kv_.end() && it->second == expected)) {
            set(key, std::move(desired), r);
            if (!r.ok) break;
          }
          const auto now = kv_.find(key);
          const std::string& v = now == kv_.end() ? expected : now->second;
          put_str(reply, v);
          break;
        }
        case kGet: {
          auto key = r.str(kStoreMaxKeyBytes, "a key");
          if (!r.ok) break;
          if (kv_.count(key)) {
            put_str(reply, kv_[key]);
          } else {
            waiters_.push_back({fd, {key}, key});
          }
          break;
        }
        case kAdd: {
          auto key = r.str(kStoreMaxKeyBytes, "a key");
          const auto delta = r.value<std::int64_t>();
          if (!r.ok) break;
          const auto it = kv_.find(key);
          std::int64_t now = 0;
          const auto was =
              it == kv_.end() ? std::optional<std::int64_t>(0) : parse_counter(it->second);
          if (!was) {
            r.fail("ADD to a value that is not an integer");
            break;
          }
          if (__builtin_add_overflow(*was, delta, &now)) {
            r.fail("ADD past the int64 range");
            break;
          }
          set(key, std::to_string(now), r);
          if (!r.ok) break;
          reply.resize(sizeof now);
          std::memcpy(reply.data(), &now, sizeof now);
          break;
        }
        case kCheck:
        case kWait: {
          auto keys = r.strs();
          if (!r.ok) break;
          if (q == kCheck) {
            reply.push_back(static_cast<char>(has(keys) ? kReady : kNotReady));
          } else if (has(keys)) {
            reply.push_back(static_cast<char>(kStopWaiting));
          } else {
            waiters_.push_back({fd, std::move(keys), std::nullopt});
          }
          break;
        }
        case kGetNumKeys: {
          const auto n = static_cast<std::int64_t>(kv_.size());
          reply.resize(sizeof n);
          std::memcpy(reply.data(), &n, sizeof n);
          break;
        }
        case kDeleteKey: {
          auto key = r.str(kStoreMaxKeyBytes, "a key");
          if (!r.ok) break;
          const auto it = kv_.find(key);
          std::int64_t n = 0;
          if (it != kv_.end()) {
            bytes_ -= it->first.size() + it->second.size();
            kv_.erase(it);
            n = 1;
          }
          reply.resize(sizeof n);
          std::memcpy(reply.data(), &n, sizeof n);
          break;
        }
        default:
          r.fail(fmt::format("query {} is not served", static_cast<int>(code)));
      }
      if (!r.bad.empty()) {
        why = std::move(r.bad);
        return false;
      }
      if (!r.ok) {  // incomplete: wait for more bytes, up to one request's limit
        if (in.size() > kStoreMaxRequestBytes) {
          why = fmt::format("a request over {} bytes", kStoreMaxRequestBytes);
          return false;
        }
        return true;
      }
      in.erase(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(r.used()));
      if (!reply.empty()) send_fd(fd, reply);
    }
  }

  void drop(int fd) {
    std::erase_if(waiters_, [fd](const Waiter& w) { return w.fd == fd; });
  }

 private:
  bool has(const std::vector<std::string>& keys) const {
    for (const auto& k : keys) {
      if (!kv_.count(k)) return false;
    }
    return true;
  }
  // Stores key = value unless the store would grow past kStoreMaxBytes (then `r` fails).
  void set(std::string key, std::string value, Reader& r) {
    const auto found = kv_.find(key);
    const std::size_t old = found == kv_.end() ? 0 : found->first.size() + found->second.size();
    const std::size_t now = key.size() + value.size();
    if (bytes_ - old + now > kStoreMaxBytes) {
      r.fail(fmt::format("the store holds {} bytes (at most {})", bytes_, kStoreMaxBytes));
      return;
    }
    bytes_ = bytes_ - old + now;
    kv_[std::move(key)] = std::move(value);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (!has(it->keys)) {
        ++it;
        continue;
      }
      std::vector<char> reply;
      if (it->get) {
        put_str(reply, kv_[*it->get]);
      } else {
        reply.push_back(static_cast<char>(kStopWaiting));
      }
      send_fd(it->fd, reply);
      it = waiters_.erase(it);
    }
  }

  std::map<std::string, std::string> kv_;
  std::size_t bytes_ = 0;  // keys and values held
  std::vector<Waiter> waiters_;
};

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
    Dialect dialect = Dialect::kUnknown;
  };
  std::map<int, Conn> conns;
  Store store;
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

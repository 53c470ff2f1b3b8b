#include "gpuorch/telemetry/http_server.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpuorch/base/log.hpp"
#include "gpuorch/telemetry/http_stream.hpp"

#if defined(__SANITIZE_ADDRESS__)
// libasan's; GCC ships no header for it.
extern "C" void __sanitizer_purge_allocator();
#endif

namespace gpuorch::telemetry {
namespace {

using Clock = std::chrono::steady_clock;

// Freed request bodies back to the system: glibc keeps freed memory in its arenas (1.3 GB stayed
// resident after 200 slow 8 MiB bodies, issue 30) until malloc_trim. Under AddressSanitizer the
// allocator is ASan's (glibc's malloc_trim then faults on an arena it never set up), which
// returns memory, its quarantine included, on __sanitizer_purge_allocator.
void give_memory_back() {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_purge_allocator();
#else
  ::malloc_trim(0);
#endif
}

// httplib's parser is Server::process_request(Stream&, ...), protected; the listening socket is
// the protected svr_sock_. A pointer to a protected member formed through a derived class is
// usable on any Server (C++ [class.protected]), so the hardening works on the httplib::Server
// and httplib::SSLServer objects the callers own, without a subclass of theirs.
struct ServerAccess : httplib::Server {
  static constexpr auto kProcessRequest = &ServerAccess::process_request;
  static constexpr auto kListenSocket = &ServerAccess::svr_sock_;
};

// Threads started on demand, one per connection task, up to `max`; a thread idle for a while
// exits (its stack goes back to the system after an attack's burst of connections).
class ElasticPool {
 public:
  explicit ElasticPool(std::size_t max) : max_(max < 1 ? 1 : max) {}
  ~ElasticPool() { shutdown(); }
  ElasticPool(const ElasticPool&) = delete;
  ElasticPool& operator=(const ElasticPool&) = delete;

  void enqueue(std::function<void()> fn) {
    std::vector<std::thread> exited;
    {
      const std::lock_guard lock(mutex_);
      exited.swap(exited_);
      tasks_.push_back(std::move(fn));
      if (idle_ < tasks_.size() && threads_.size() < max_) {
        const std::uint64_t id = next_id_++;
        threads_.emplace(id, std::thread([this, id] { work(id); }));
      }
    }
    wake_.notify_one();
    for (auto& t : exited) t.join();
  }

  void shutdown() {
    std::vector<std::thread> threads;
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
      for (auto& [id, t] : threads_) threads.push_back(std::move(t));
      threads_.clear();
      for (auto& t : exited_) threads.push_back(std::move(t));
      exited_.clear();
    }
    wake_.notify_all();
    for (auto& t : threads) t.join();
  }

 private:
  static constexpr std::chrono::seconds kIdleExit{10};

  void work(std::uint64_t id) {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      const bool woken =
          wake_.wait_for(lock, kIdleExit, [this] { return stopping_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) {
        if (stopping_) return;  // shutdown joins it
        if (!woken) {
          // Idle: hand our handle over to be joined by the next enqueue or the shutdown.
          if (const auto it = threads_.find(id); it != threads_.end()) {
            exited_.push_back(std::move(it->second));
            threads_.erase(it);
            return;
          }
        }
        continue;
      }
      auto fn = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  const std::size_t max_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  std::map<std::uint64_t, std::thread> threads_;
  std::vector<std::thread> exited_;
  std::uint64_t next_id_ = 0;
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

// What the limits count, for every connection of one server.
class Ledger {
 public:
  explicit Ledger(const HttpLimits& limits) : limits_(limits) {}

  // Waits while `max_connections` are open (or until `give_up` says so).
  void wait_for_room(const std::function<bool()>& give_up) {
    std::unique_lock lock(mutex_);
    while (fds_.size() >= limits_.max_connections && !give_up()) {
      room_.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
  // Counts a new connection from `peer`; false (nothing counted) when that peer has its share.
  bool open(int fd, const std::string& peer) {
    const std::lock_guard lock(mutex_);
    auto& p = peers_[peer];
    const bool loopback = peer.rfind("127.", 0) == 0 || peer == "::1";
    if (p.connections >= limits_.max_connections_per_peer &&
        (!loopback || limits_.cap_loopback_peers)) {
      return false;
    }
    ++p.connections;
    fds_.insert(fd);
    return true;
  }
  // Closes `fd` (under the lock, so that `shut_all` never touches a reused descriptor).
  void close(int fd, const std::string& peer) {
    {
      const std::lock_guard lock(mutex_);
      fds_.erase(fd);
      ::shutdown(fd, SHUT_RDWR);
      ::close(fd);
      const auto it = peers_.find(peer);
      if (it != peers_.end() && --it->second.connections == 0 && it->second.body_bytes == 0) {
        peers_.erase(it);
      }
    }
    room_.notify_one();
  }
  // Ends every open connection's reads and writes (at stop).
  void shut_all() {
    const std::lock_guard lock(mutex_);
    for (const int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }
  bool reserve_body(const std::string& peer, std::size_t bytes) {
    const std::lock_guard lock(mutex_);
    auto& p = peers_[peer];
    if (body_bytes_ + bytes > limits_.max_body_bytes_in_flight ||
        p.body_bytes + bytes > limits_.max_body_bytes_per_peer) {
      return false;
    }
    body_bytes_ += bytes;
    p.body_bytes += bytes;
    return true;
  }
  // Gives back a reservation; whether the heap should be trimmed now (a large body just freed,
  // and no other in flight or none trimmed for a second).
  bool release_body(const std::string& peer, std::size_t bytes) {
    constexpr std::size_t kTrimAfter = std::size_t{1} << 20;
    const std::lock_guard lock(mutex_);
    body_bytes_ -= bytes;
    if (const auto it = peers_.find(peer); it != peers_.end()) it->second.body_bytes -= bytes;
    const auto now = Clock::now();
    if (bytes < kTrimAfter || (body_bytes_ > 0 && now - last_trim_ < std::chrono::seconds(1))) {
      return false;
    }
    last_trim_ = now;
    return true;
  }
  // True the first time `key` is seen (up to a bounded number of keys): for log-once lines.
  bool first_time(const std::string& key) {
    const std::lock_guard lock(mutex_);
    return logged_.size() < 4096 && logged_.insert(key).second;
  }

 private:
  struct Peer {
    std::size_t connections = 0;
    std::size_t body_bytes = 0;
  };
  const HttpLimits& limits_;
  std::mutex mutex_;
  std::condition_variable room_;
  std::unordered_set<int> fds_;
  std::unordered_map<std::string, Peer> peers_;
  std::size_t body_bytes_ = 0;
  Clock::time_point last_trim_{};
  std::unordered_set<std::string> logged_;
};

struct Guard;

// The request being served on this thread, for the pre-routing hook.
struct Connection {
  Guard* guard = nullptr;
  std::string peer;
  DeadlineStream* stream = nullptr;
  Clock::time_point request_deadline{};
  std::size_t reserved = 0;
  bool admitted = false;
  bool close = false;
};
thread_local Connection* t_connection = nullptr;

struct Guard {
  Guard(httplib::Server& s, HttpLimits l) : server(s), limits(std::move(l)), ledger(limits) {}

  httplib::Server& server;
  const HttpLimits limits;
  Ledger ledger;
  SSL_CTX* tls = nullptr;

  [[nodiscard]] int listen_socket() const { return server.*ServerAccess::kListenSocket; }

  void warn_once(const std::string& key, const std::string& line) {
    if (ledger.first_time(key)) base::log(base::Severity::kWarning, line);
  }

  // httplib's listen_after_bind calls new_task_queue once, on its listening thread, before its
  // own accept loop; that call runs this loop instead, until `stop` closes the listening socket,
  // and only then returns (with nothing left for httplib's loop, which sees the socket closed).
  void accept_loop() {
    ElasticPool pool(limits.max_connections);
    for (;;) {
      ledger.wait_for_room([this] { return listen_socket() == INVALID_SOCKET; });
      const int lfd = listen_socket();
      if (lfd == INVALID_SOCKET) break;
      pollfd p{lfd, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;  // a timeout, to see a stop
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      const int fd =
          ::accept4(lfd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        continue;  // EAGAIN, ECONNABORTED, ...; a closed socket is seen at the top
      }
      std::string peer;
      int peer_port = 0;
      ip_and_port(addr, peer, peer_port);
      const int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      if (!ledger.open(fd, peer)) {
        refuse_peer(fd, peer);
        continue;
      }
      pool.enqueue([this, fd, peer] { serve(fd, peer); });
    }
    ledger.shut_all();
    pool.shutdown();
  }

  void refuse_peer(int fd, const std::string& peer) {
    const std::string body = fmt::format("too many connections from {} (at most {})\n", peer,
                                         limits.max_connections_per_peer);
    const std::string answer = fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\n"
        "Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n{}",
        body.size(), body);
    (void)::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::close(fd);
    warn_once("peer-cap " + peer,
              fmt::format("http: refusing connections from {}: {} open already (at most {} per "
                          "address; logged once per address)",
                          peer, limits.max_connections_per_peer, limits.max_connections_per_peer));
  }

  void serve(int fd, const std::string& peer) {
    SSL* ssl = nullptr;
    if (tls != nullptr && (ssl = SSL_new(tls)) != nullptr) SSL_set_fd(ssl, fd);
    DeadlineStream stream(fd, ssl, limits.read_timeout, limits.write_timeout);
    bool ok = tls == nullptr ||
              (ssl != nullptr && stream.handshake(Clock::now() + limits.header_timeout));
    const auto setup = [ssl](httplib::Request& req) { req.ssl = ssl; };
    for (std::size_t count = 0; ok && count < limits.keep_alive_max_count; ++count) {
      if (listen_socket() == INVALID_SOCKET ||
          !stream.wait_for_request(limits.keep_alive_timeout)) {
        break;
      }
      const auto start = Clock::now();
      Connection c{this, peer, &stream, start + limits.request_timeout};
      stream.set_phase("the header deadline");
      stream.set_read_limits(std::min(start + limits.header_timeout, c.request_deadline),
                             limits.max_header_bytes);
      stream.set_write_deadline(c.request_deadline);
      bool closed = false;
      t_connection = &c;
      ok = (server.*ServerAccess::kProcessRequest)(
          stream, count + 1 == limits.keep_alive_max_count, closed,
          ssl != nullptr ? std::function<void(httplib::Request&)>(setup) : nullptr);
      t_connection = nullptr;
      if (c.reserved > 0 && ledger.release_body(peer, c.reserved)) give_memory_back();
      if (c.close && !stream.failed()) {
        // Refused with its body unread: take in what the peer still sends for a moment before
        // closing, so that it reads the answer instead of a reset (and a client that writes
        // its whole body first is not killed by SIGPIPE); bounded in time and bytes.
        stream.drain(Clock::now() + std::chrono::seconds(2),
                     std::max(2 * limits.max_payload, std::size_t{1} << 20));
      }
      if (closed || c.close || stream.failed()) break;
    }
    if (ssl != nullptr) {
      if (ok && !stream.failed()) (void)SSL_shutdown(ssl);
      SSL_free(ssl);
    }
    ledger.close(fd, peer);
  }

  // The headers are in, the body is not: the caller's admission, then the body's limits.
  bool admit(const httplib::Request& req, httplib::Response& res, Connection& c) {
    if (c.admitted) return !c.close;
    c.admitted = true;
    auto refuse = [&](int status, const std::string& why) {
      res.status = status;
      if (!why.empty()) res.set_content(why + "\n", "text/plain");
      res.set_header("Connection", "close");
      c.close = true;
      return false;
    };
    if (limits.admit && !limits.admit(req, res)) return refuse(res.status, "");
    const auto now = Clock::now();
    c.stream->set_phase("the body deadline");
    const bool body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
                      req.method == "DELETE" || req.method == "PRI";
    if (!body) {
      c.stream->set_read_limits(c.request_deadline, 0);
      return true;
    }
    if (req.has_header("Transfer-Encoding")) {
      return refuse(411, "a request body needs a Content-Length (no Transfer-Encoding)");
    }
    if (req.get_header_value_count("Content-Length") != 1) {
      return refuse(411, "a request body needs one Content-Length");
    }
    const std::string& text = req.get_header_value("Content-Length");
    if (text.empty() || text.size() > 18 ||
        !std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      return refuse(400, "Content-Length is not a number");
    }
    const std::size_t bytes = std::stoull(text);
    if (bytes > limits.max_payload) {
      return refuse(413,
                    fmt::format("request body of {} bytes; at most {}", bytes, limits.max_payload));
    }
    if (!ledger.reserve_body(c.peer, bytes)) {
      res.set_header("Retry-After", "1");
      warn_once("body-budget " + c.peer,
                fmt::format("http: refusing request bodies from {}: the bodies in flight hold "
                            "their limit (logged once per address)",
                            c.peer));
      return refuse(503, "too many request bodies in flight; retry");
    }
    c.reserved = bytes;
    c.stream->set_read_limits(std::min(now + limits.body_timeout, c.request_deadline), bytes);
    return true;
  }
};

// What httplib's loop gets once ours has returned: nothing is ever queued (the listening
// socket is closed by then), and anything that were would run here as httplib would run it.
class NoQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// SO_REUSEADDR (a restart binds while old connections linger in TIME_WAIT) but not httplib's
// SO_REUSEPORT, which let a second gpuorch bind a port in use and take half its connections.
void socket_options(socket_t sock) {
  const int yes = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

}  // namespace

int harden_and_bind(httplib::Server& server, const std::string& address, int port,
                    const HttpLimits& limits) {
  auto guard = std::make_shared<Guard>(server, limits);
  if (auto* tls = dynamic_cast<httplib::SSLServer*>(&server)) guard->tls = tls->ssl_context();
  server.new_task_queue = [guard] {
    guard->accept_loop();
    return new NoQueue;  // httplib owns it
  };
  server.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    Connection* c = t_connection;
    return c == nullptr || c->guard->admit(req, res, *c)
               ? httplib::Server::HandlerResponse::Unhandled
               : httplib::Server::HandlerResponse::Handled;
  });
  server.set_expect_100_continue_handler([](const httplib::Request& req, httplib::Response& res) {
    Connection* c = t_connection;
    return c == nullptr || c->guard->admit(req, res, *c) ? 100 : res.status;
  });
  server.set_payload_max_length(limits.max_payload);
  server.set_socket_options(socket_options);
  const int bound = port == 0 ? server.bind_to_any_port(address)
                              : (server.bind_to_port(address, port) ? port : -1);
  if (bound >= 0) ::listen(server.*ServerAccess::kListenSocket, limits.backlog);
  return bound;
}

std::string host_port(const std::string& address, int port) {
  if (address.find(':') != std::string::npos) return fmt::format("[{}]:{}", address, port);
  return fmt::format("{}:{}", address, port);
}

std::string listen_scope(const std::string& address) {
  if (address == "0.0.0.0") return "every IPv4 interface";
  if (address == "::") return "every interface";
  if (address == "::1" || address == "localhost" || address.rfind("127.", 0) == 0) {
    return "loopback only";
  }
  return "this address only";
}

}  // namespace gpuorch::telemetry

#include "gpuorch/comm/peer_group.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

namespace gpuorch::comm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kMaxFrame = 64u << 20;
constexpr std::string_view kHello = "gpuorch-bootstrap 1";

double seconds(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(std::min<long long>(left.count(), 1 << 30)) : 0;
}

// Waits for `events` on fd until the deadline: true when ready, false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Listens on every address (IPv6 dual stack when the host has IPv6, else IPv4).
int listen_any(int port, int backlog) {
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1, zero = 0;
  if (fd >= 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<std::uint16_t>(port));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, backlog) == 0) {
      return fd;
    }
    const int e = errno;
    ::close(fd);
    if (e != EAFNOSUPPORT && e != EADDRNOTAVAIL) {
      throw PeerError(fmt::format("rank 0 cannot listen on port {}: {}", port, std::strerror(e)));
    }
  }
  fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw PeerError(fmt::format("socket: {}", std::strerror(errno)));
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, backlog) != 0) {
    const int e = errno;
    ::close(fd);
    throw PeerError(fmt::format("rank 0 cannot listen on port {}: {}", port, std::strerror(e)));
  }
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage s{};
  socklen_t len = sizeof s;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&s), &len);
  if (s.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&s)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&s)->sin_port);
}

// One non-blocking connect attempt to each resolved address; the connected fd or -1 (errno_out).
int try_connect(const addrinfo* list, Clock::time_point deadline, int& errno_out) {
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      errno_out = errno;
      continue;
    }
    int err = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        const auto attempt = std::min(deadline, Clock::now() + std::chrono::seconds(1));
        err = ETIMEDOUT;
        if (wait_fd(fd, POLLOUT, attempt)) {
          socklen_t len = sizeof err;
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        }
      }
    }
    if (err == 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      return fd;
    }
    errno_out = err;
    ::close(fd);
  }
  return -1;
}

std::string peer_name(int peer) { return fmt::format("rank {}", peer); }

}  // namespace

PeerGroup::PeerGroup(int rank, int world, const std::string& addr, int port,
                     std::chrono::milliseconds timeout,
                     const std::function<void(int)>& on_listening)
    : rank_(rank), world_(world), timeout_(timeout) {
  if (world < 1 || rank < 0 || rank >= world) {
    throw PeerError(fmt::format("rank {} is not in 0..{}", rank, world - 1));
  }
  const auto deadline = Clock::now() + timeout;
  if (world == 1) return;
  if (rank == 0) {
    fds_.assign(static_cast<std::size_t>(world), -1);
    const int lfd = listen_any(port, world);
    if (on_listening) on_listening(bound_port(lfd));
    int joined = 1;
    try {
      while (joined < world) {
        if (!wait_fd(lfd, POLLIN, deadline)) {
          std::vector<int> missing;
          for (int r = 1; r < world; ++r) {
            if (fds_[static_cast<std::size_t>(r)] < 0) missing.push_back(r);
          }
          throw PeerError(fmt::format(
              "waited {:g} s on port {} for rank{} {} of {}: never connected", seconds(timeout),
              bound_port(lfd), missing.size() == 1 ? "" : "s", fmt::join(missing, ", "), world));
        }
        const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        set_nodelay(fd);
        // Who is it? A stranger (a port scan, a late rank of another job) is dropped, not fatal.
        std::string hello;
        try {
          const auto saved = timeout_;
          timeout_ = std::chrono::milliseconds(std::max(1, remaining_ms(deadline)));
          hello = recv_frame(fd, -1);
          timeout_ = saved;
        } catch (const PeerError&) {
          ::close(fd);
          continue;
        }
        std::istringstream in(hello);
        std::string word, version;
        int r = -1, w = -1;
        in >> word >> version >> r >> w;
        if (word + " " + version != kHello) {
          ::close(fd);
          continue;
        }
        std::string problem;
        if (w != world) {
          problem = fmt::format("rank {} has WORLD_SIZE {}, rank 0 has {}", r, w, world);
        } else if (r < 1 || r >= world) {
          problem = fmt::format("a peer says it is rank {}, not in 1..{}", r, world - 1);
        } else if (fds_[static_cast<std::size_t>(r)] >= 0) {
          problem = fmt::format("two processes say they are rank {}", r);
        }
        if (!problem.empty()) {
          try {
            send_frame(fd, "error " + problem, r);
          } catch (const PeerError&) {
          }
          ::close(fd);
          throw PeerError(problem);
        }
        fds_[static_cast<std::size_t>(r)] = fd;
        ++joined;
      }
      ::close(lfd);
      for (int r = 1; r < world; ++r) send_frame(fds_[static_cast<std::size_t>(r)], "ok", r);
    } catch (...) {
      ::close(lfd);
      for (int& fd : fds_) {
        if (fd >= 0) ::close(fd);
        fd = -1;
      }
      throw;
    }
    return;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  if (const int g = ::getaddrinfo(addr.c_str(), service.c_str(), &hints, &list); g != 0) {
    throw PeerError(fmt::format("MASTER_ADDR {}: {}", addr, ::gai_strerror(g)));
  }
  int fd = -1, err = 0;
  while ((fd = try_connect(list, deadline, err)) < 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(list);
  if (fd < 0) {
    throw PeerError(fmt::format("rank {}: rank 0 at {}:{} not reachable within {:g} s ({})", rank,
                                addr, port, seconds(timeout), std::strerror(err)));
  }
  set_nodelay(fd);
  fds_.push_back(fd);
  send_frame(fd, fmt::format("{} {} {}", kHello, rank, world), 0);
  const auto saved = timeout_;
  timeout_ = std::chrono::milliseconds(std::max(1, remaining_ms(deadline)));
  std::string reply;
  try {
    reply = recv_frame(fd, 0);
  } catch (const PeerError& e) {
    timeout_ = saved;
    throw PeerError(
        fmt::format("rank {}: waiting for all {} ranks to join: {}", rank, world, e.what()));
  }
  timeout_ = saved;
  if (reply != "ok") throw PeerError(reply.starts_with("error ") ? reply.substr(6) : reply);
}

PeerGroup::~PeerGroup() {
  for (const int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

void PeerGroup::send_frame(int fd, const std::string& payload, int peer) {
  std::string buf(4, '\0');
  const auto n = htonl(static_cast<std::uint32_t>(payload.size()));
  std::memcpy(buf.data(), &n, 4);
  buf += payload;
  std::size_t done = 0;
  const auto deadline = Clock::now() + timeout_;
  while (done < buf.size()) {
    // MSG_NOSIGNAL: a peer that died gives EPIPE here, not a SIGPIPE that kills this process.
    const ssize_t k = ::send(fd, buf.data() + done, buf.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      done += static_cast<std::size_t>(k);
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd, POLLOUT, deadline)) {
        throw PeerError(
            fmt::format("{} took nothing for {:g} s (hung?)", peer_name(peer), seconds(timeout_)));
      }
      continue;
    }
    throw PeerError(fmt::format("{} closed its connection (exited or died)", peer_name(peer)));
  }
}

std::string PeerGroup::recv_frame(int fd, int peer) {
  const auto deadline = Clock::now() + timeout_;
  auto read_exact = [&](char* p, std::size_t len) {
    std::size_t done = 0;
    while (done < len) {
      if (!wait_fd(fd, POLLIN, deadline)) {
        throw PeerError(
            fmt::format("{} sent nothing for {:g} s (hung?)", peer_name(peer), seconds(timeout_)));
      }
      const ssize_t k = ::recv(fd, p + done, len - done, MSG_DONTWAIT);
      if (k > 0) {
        done += static_cast<std::size_t>(k);
      } else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
        throw PeerError(fmt::format("{} closed its connection (exited or died)", peer_name(peer)));
      }
    }
  };
  std::uint32_t n = 0;
  read_exact(reinterpret_cast<char*>(&n), 4);
  n = ntohl(n);
  if (n > kMaxFrame) throw PeerError(fmt::format("{} sent a {} byte message", peer_name(peer), n));
  std::string out(n, '\0');
  read_exact(out.data(), n);
  return out;
}

std::string PeerGroup::broadcast(const std::string& bytes_at_root) {
  if (world_ == 1) return bytes_at_root;
  if (rank_ == 0) {
    for (int r = 1; r < world_; ++r)
      send_frame(fds_[static_cast<std::size_t>(r)], bytes_at_root, r);
    return bytes_at_root;
  }
  return recv_frame(fds_[0], 0);
}

namespace {
std::string encode(const std::vector<double>& v) {
  std::string out(v.size() * 8, '\0');
  for (std::size_t i = 0; i < v.size(); ++i) {
    auto bits = std::bit_cast<std::uint64_t>(v[i]);
    for (int b = 7; b >= 0; --b, bits >>= 8)
      out[i * 8 + static_cast<std::size_t>(b)] = static_cast<char>(bits & 0xff);
  }
  return out;
}
std::vector<double> decode(const std::string& s) {
  std::vector<double> v(s.size() / 8);
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::uint64_t bits = 0;
    for (std::size_t b = 0; b < 8; ++b)
      bits = (bits << 8) | static_cast<unsigned char>(s[i * 8 + b]);
    v[i] = std::bit_cast<double>(bits);
  }
  return v;
}
}  // namespace

std::vector<std::string> PeerGroup::all_gather(const std::string& mine) {
  if (world_ == 1) return {mine};
  auto pack = [](const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& p : parts) {
      const auto n = htonl(static_cast<std::uint32_t>(p.size()));
      out.append(reinterpret_cast<const char*>(&n), 4);
      out += p;
    }
    return out;
  };
  std::string packed;
  if (rank_ == 0) {
    std::vector<std::string> parts{mine};
    for (int r = 1; r < world_; ++r)
      parts.push_back(recv_frame(fds_[static_cast<std::size_t>(r)], r));
    packed = pack(parts);
    for (int r = 1; r < world_; ++r) send_frame(fds_[static_cast<std::size_t>(r)], packed, r);
  } else {
    send_frame(fds_[0], mine, 0);
    packed = recv_frame(fds_[0], 0);
  }
  std::vector<std::string> parts;
  for (std::size_t at = 0; at + 4 <= packed.size();) {
    std::uint32_t n = 0;
    std::memcpy(&n, packed.data() + at, 4);
    n = ntohl(n);
    at += 4;
    if (n > packed.size() - at) throw PeerError("rank 0 sent a truncated gather");
    parts.push_back(packed.substr(at, n));
    at += n;
  }
  if (parts.size() != static_cast<std::size_t>(world_)) {
    throw PeerError(fmt::format("gather: {} parts for {} ranks", parts.size(), world_));
  }
  return parts;
}

std::vector<double> PeerGroup::sum(const std::vector<double>& values) {
  if (world_ == 1) return values;
  if (rank_ != 0) {
    send_frame(fds_[0], encode(values), 0);
    return decode(recv_frame(fds_[0], 0));
  }
  std::vector<double> total = values;
  for (int r = 1; r < world_; ++r) {
    const auto v = decode(recv_frame(fds_[static_cast<std::size_t>(r)], r));
    if (v.size() != total.size()) {
      throw PeerError(
          fmt::format("rank {} sent {} values, rank 0 has {}", r, v.size(), total.size()));
    }
    for (std::size_t i = 0; i < v.size(); ++i) total[i] += v[i];
  }
  const std::string out = encode(total);
  for (int r = 1; r < world_; ++r) send_frame(fds_[static_cast<std::size_t>(r)], out, r);
  return total;
}

std::string PeerGroup::lost_peer() const {
  for (std::size_t i = 0; i < fds_.size(); ++i) {
    if (fds_[i] < 0) continue;
    pollfd p{fds_[i], POLLRDHUP, 0};
    if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
      return peer_name(rank_ == 0 ? static_cast<int>(i) : 0);
    }
  }
  return "";
}

struct PeerWatchdog::State {
  const PeerGroup& group;
  std::chrono::milliseconds timeout;
  std::function<void(const std::string&)> on_fire;
  std::mutex m;
  std::condition_variable cv;
  bool stop = false, armed = false, fired = false;
  std::string phase;
  Clock::time_point last_beat = Clock::now();
  std::thread thread;

  void loop() {
    std::unique_lock lock(m);
    while (!stop) {
      cv.wait_for(lock, std::chrono::milliseconds(50));
      if (stop || !armed || fired) continue;
      std::string what;
      if (const auto gone = group.lost_peer(); !gone.empty()) {
        what = fmt::format("{} left during {} (exited or died)", gone, phase);
      } else if (Clock::now() - last_beat > timeout) {
        what = fmt::format("no progress for {:g} s during {} (a peer or a GPU hung?)",
                           seconds(timeout), phase);
      }
      if (what.empty()) continue;
      fired = true;
      lock.unlock();
      on_fire(what);
      lock.lock();
    }
  }
};

PeerWatchdog::PeerWatchdog(const PeerGroup& group, std::chrono::milliseconds timeout,
                           std::function<void(const std::string&)> on_fire)
    : state_(new State{
          group, timeout, std::move(on_fire), {}, {}, false, false, false, {}, Clock::now(), {}}) {
  if (!state_->on_fire) {
    state_->on_fire = [](const std::string& what) {
      std::fflush(stdout);
      std::fprintf(stderr, "gpuorch: %s\n", what.c_str());
      std::fflush(stderr);
      ::_exit(1);  // the main thread may be blocked inside NCCL: no unwinding, no atexit
    };
  }
  state_->thread = std::thread([s = state_.get()] { s->loop(); });
}

PeerWatchdog::~PeerWatchdog() {
  {
    std::lock_guard lock(state_->m);
    state_->stop = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

void PeerWatchdog::arm(const std::string& phase) {
  std::lock_guard lock(state_->m);
  state_->armed = true;
  state_->phase = phase;
  state_->last_beat = Clock::now();
}

void PeerWatchdog::disarm() {
  std::lock_guard lock(state_->m);
  state_->armed = false;
}

void PeerWatchdog::beat() {
  std::lock_guard lock(state_->m);
  state_->last_beat = Clock::now();
}

}  // namespace gpuorch::comm

#include "gpuorch/telemetry/http_stream.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace gpuorch::telemetry {

void ip_and_port(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  }
  ip = text;
  // A dual-stack socket's IPv4 peer, as the address it is (one per-peer count for both forms).
  if (ip.rfind("::ffff:", 0) == 0 && ip.find('.') != std::string::npos) ip.erase(0, 7);
}

DeadlineStream::DeadlineStream(int fd, SSL* ssl, std::chrono::milliseconds read_timeout,
                               std::chrono::milliseconds write_timeout)
    : fd_(fd), ssl_(ssl), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

bool DeadlineStream::wait(short events, Clock::time_point until) const {
  for (;;) {
    const auto now = Clock::now();
    if (now >= until) return false;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    pollfd p{fd_, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, INT_MAX)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

short DeadlineStream::ssl_wants(int result, bool& eof) const {
  eof = false;
  switch (SSL_get_error(ssl_, result)) {
    case SSL_ERROR_WANT_READ:
      return POLLIN;
    case SSL_ERROR_WANT_WRITE:
      return POLLOUT;
    case SSL_ERROR_ZERO_RETURN:
      eof = true;
      return 0;
    default:
      return 0;
  }
}

bool DeadlineStream::handshake(Clock::time_point deadline) {
  for (;;) {
    ERR_clear_error();
    const int r = SSL_accept(ssl_);
    if (r == 1) return true;
    bool eof = false;
    const short events = ssl_wants(r, eof);
    if (events == 0 || !wait(events, deadline)) {
      failure_ = "the TLS handshake";
      return false;
    }
  }
}

bool DeadlineStream::wait_for_request(std::chrono::milliseconds idle) {
  if (failed()) return false;
  if (pos_ < end_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0)) return true;
  return wait(POLLIN, Clock::now() + idle);
}

void DeadlineStream::set_read_limits(Clock::time_point deadline, std::size_t budget) {
  read_deadline_ = deadline;
  budget_ = budget;
}

void DeadlineStream::drain(Clock::time_point deadline, std::size_t max_bytes) {
  set_read_limits(deadline, max_bytes);
  std::array<char, 16 * 1024> sink{};
  while (read(sink.data(), sink.size()) > 0) {
  }
}

ssize_t DeadlineStream::fill() {
  for (;;) {
    ssize_t n = 0;
    short events = POLLIN;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int r = SSL_read(ssl_, buf_.data(), static_cast<int>(buf_.size()));
      if (r > 0) {
        n = r;
      } else {
        bool eof = false;
        events = ssl_wants(r, eof);
        if (eof) return 0;
        if (events == 0) return -1;
      }
    } else {
      n = ::recv(fd_, buf_.data(), buf_.size(), 0);
      if (n == 0) return 0;
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      }
    }
    if (n > 0) {
      pos_ = 0;
      end_ = static_cast<std::size_t>(n);
      return n;
    }
    const auto now = Clock::now();
    if (now >= read_deadline_) {
      failure_ = phase_;
      return -1;
    }
    if (!wait(events, std::min(now + read_timeout_, read_deadline_))) {
      failure_ = Clock::now() >= read_deadline_ ? phase_ : "the read timeout";
      return -1;
    }
  }
}

ssize_t DeadlineStream::read(char* ptr, size_t size) {
  if (failed()) return -1;
  if (budget_ == 0) {
    failure_ = "the size limit";
    return -1;
  }
  // Bytes already buffered count against the deadline too: a peer that sent its whole slow
  // request at once must not outlive it.
  if (Clock::now() >= read_deadline_) {
    failure_ = phase_;
    return -1;
  }
  if (pos_ == end_) {
    const ssize_t n = fill();
    if (n <= 0) return n;
  }
  const std::size_t take = std::min({size, end_ - pos_, budget_});
  std::memcpy(ptr, buf_.data() + pos_, take);
  pos_ += take;
  budget_ -= take;
  return static_cast<ssize_t>(take);
}

ssize_t DeadlineStream::write(const char* ptr, size_t size) {
  if (size == 0) return 0;
  for (;;) {
    short events = POLLOUT;
    if (ssl_ != nullptr) {
      ERR_clear_error();
      const int r = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, INT_MAX)));
      if (r > 0) return r;
      bool eof = false;
      events = ssl_wants(r, eof);
      if (events == 0) return -1;
    } else {
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
      if (n > 0) return n;
      if (n < 0 && errno == EINTR) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return -1;
    }
    if (!wait(events, std::min(Clock::now() + write_timeout_, write_deadline_))) return -1;
  }
}

bool DeadlineStream::is_readable() const {
  return pos_ < end_ || wait(POLLIN, std::min(Clock::now() + read_timeout_, read_deadline_));
}

bool DeadlineStream::is_writable() const {
  return wait(POLLOUT, std::min(Clock::now() + write_timeout_, write_deadline_));
}

void DeadlineStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    ip_and_port(addr, ip, port);
  }
}

void DeadlineStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    ip_and_port(addr, ip, port);
  }
}

}  // namespace gpuorch::telemetry

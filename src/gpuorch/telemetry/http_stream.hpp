#pragma once
// One connection's bytes for cpp-httplib's request parser, plain or TLS, where every wait is
// bounded twice: by the silence allowed between two reads or writes, and by the deadline of the
// phase the request is in (telemetry/http_server.hpp sets them). httplib's own stream bounds
// only the silence, so a peer that sends one byte every 0.8 s held a connection (and its thread)
// for as long as it liked (issue 30). The socket is non-blocking; waits are poll().
#include <httplib.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <string>

namespace gpuorch::telemetry {

// A socket address as "1.2.3.4" / "::1" (an IPv4-mapped IPv6 address as its IPv4 form) and port.
void ip_and_port(const sockaddr_storage& addr, std::string& ip, int& port);

class DeadlineStream final : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;

  // `ssl`: null for plain TCP, else an SSL object on `fd` (owned by the caller).
  DeadlineStream(int fd, SSL* ssl, std::chrono::milliseconds read_timeout,
                 std::chrono::milliseconds write_timeout);

  // TLS only: the server side of the handshake, finished by `deadline`.
  bool handshake(Clock::time_point deadline);
  // Waits up to `idle` for the first byte of the next request; false when none came.
  bool wait_for_request(std::chrono::milliseconds idle);

  // Reads fail once `deadline` has passed or `budget` more bytes have been read; writes fail
  // once `write_deadline` has passed. A failed read fails every later one (the connection ends).
  void set_read_limits(Clock::time_point deadline, std::size_t budget);
  void set_write_deadline(Clock::time_point deadline) { write_deadline_ = deadline; }
  // Reads and drops what the peer still sends, until it stops, `deadline` or `max_bytes`.
  void drain(Clock::time_point deadline, std::size_t max_bytes);
  [[nodiscard]] bool failed() const { return failure_ != nullptr; }
  // Why it failed ("the header deadline"...); empty when it has not.
  [[nodiscard]] std::string failure() const { return failure_ ? failure_ : ""; }
  // What the deadline passed in the current phase means, for failure().
  void set_phase(const char* deadline_name) { phase_ = deadline_name; }

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  // One recv / SSL_read into the buffer: > 0 read, 0 end of stream, < 0 failed.
  ssize_t fill();
  // Waits for `events` until `until`; false when the time ran out or poll failed.
  bool wait(short events, Clock::time_point until) const;
  // For an SSL result <= 0: the events to wait for, or 0 when the connection is over (`eof`).
  short ssl_wants(int result, bool& eof) const;

  int fd_;
  SSL* ssl_;
  std::chrono::milliseconds read_timeout_, write_timeout_;
  Clock::time_point read_deadline_ = Clock::time_point::max();
  Clock::time_point write_deadline_ = Clock::time_point::max();
  std::size_t budget_ = static_cast<std::size_t>(-1);
  const char* failure_ = nullptr;
  const char* phase_ = "the request deadline";
  std::array<char, 16 * 1024> buf_{};
  std::size_t pos_ = 0, end_ = 0;
};

}  // namespace gpuorch::telemetry

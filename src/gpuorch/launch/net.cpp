#include "gpuorch/launch/net.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuorch::launch {
namespace {

// IPv4 only: MASTER_ADDR in torch's env:// rendezvous is commonly an IPv4 address or a name.
bool resolve(const std::string& addr, int port, sockaddr_in& out) {
  std::memset(&out, 0, sizeof out);
  out.sin_family = AF_INET;
  out.sin_port = htons(static_cast<std::uint16_t>(port));
  if (addr.empty() || addr == "0.0.0.0" || addr == "*") {
    out.sin_addr.s_addr = htonl(INADDR_ANY);
    return true;
  }
  if (inet_pton(AF_INET, addr.c_str(), &out.sin_addr) == 1) return true;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(addr.c_str(), nullptr, &hints, &res) != 0 || !res) return false;
  out.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return true;
}

class Socket {
 public:
  explicit Socket(int type) : fd_(::socket(AF_INET, type | SOCK_CLOEXEC, 0)) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  [[nodiscard]] int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

int pick_free_port(const std::string& addr) {
  sockaddr_in sa{};
  if (!resolve(addr, 0, sa)) resolve("0.0.0.0", 0, sa);
  Socket s(SOCK_STREAM);
  if (s.fd() < 0) return 0;
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    resolve("0.0.0.0", 0, sa);
    if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return 0;
  }
  socklen_t len = sizeof sa;
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) return 0;
  return ntohs(sa.sin_port);
}

bool port_available(const std::string& addr, int port) {
  sockaddr_in sa{};
  if (!resolve(addr, port, sa)) return true;  // cannot tell; the store will say
  Socket s(SOCK_STREAM);
  if (s.fd() < 0) return true;
  const int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    // EADDRNOTAVAIL: the address is not this host's, so the store is not ours to check.
    return errno != EADDRINUSE;
  }
  return ::listen(s.fd(), 1) == 0 || errno != EADDRINUSE;
}

std::string local_address_towards(const std::string& host, int port) {
  sockaddr_in sa{};
  if (!resolve(host, port, sa)) return "127.0.0.1";
  Socket s(SOCK_DGRAM);
  if (s.fd() < 0 || ::connect(s.fd(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    return "127.0.0.1";
  }
  sockaddr_in local{};
  socklen_t len = sizeof local;
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&local), &len) != 0) return "127.0.0.1";
  char text[INET_ADDRSTRLEN] = {};
  if (!inet_ntop(AF_INET, &local.sin_addr, text, sizeof text)) return "127.0.0.1";
  return text;
}

}  // namespace gpuorch::launch

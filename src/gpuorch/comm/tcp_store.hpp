#pragma once
// A key-value store over TCP for rendezvous (MASTER_ADDR:MASTER_PORT), speaking PyTorch's c10d
// TCPStore wire format (../shared/reference/comm-launch-traces.md B4): the client uses VALIDATE,
// SET, COMPARE_SET, GET, ADD, CHECK, WAIT; the server also answers GETNUMKEYS, DELETE_KEY. Both
// speak the format with VALIDATE (PyTorch >= 2.0) and the one without (PyTorch 1.13, tested in
// tests/comm/tcp_store_pytorch_test.cpp): under torchrun the workers' store is the agent's
// TCPStore, elsewhere rank 0 (or `gpuorch bench --np`) serves one. Gloo ships no TCP store.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace gpuorch::comm {

// The store cannot be reached or did not answer in time.
class StoreError : public std::runtime_error {
 public:
  explicit StoreError(const std::string& message) : std::runtime_error(message) {}
};

// The host to listen on names no address of this machine (EADDRNOTAVAIL).
class StoreAddressError : public StoreError {
 public:
  explicit StoreAddressError(const std::string& message) : StoreError(message) {}
};

// What the server takes from its clients. A request over a limit, an unknown query, ADD to a
// value that is not a decimal int64 or past the int64 range, or a SET that would grow the store
// past kStoreMaxBytes closes that connection (the wire format has no error answer); the server
// and every other connection go on. Connections beyond kStoreMaxConnections are closed at once.
inline constexpr std::uint64_t kStoreMaxKeyBytes = 64 * 1024;
inline constexpr std::uint64_t kStoreMaxValueBytes = 16 * 1024 * 1024;
inline constexpr std::uint64_t kStoreMaxKeysPerQuery = 64 * 1024;  // CHECK, WAIT
// One request, buffered until complete: COMPARE_SET's key and two values, or a CHECK/WAIT.
inline constexpr std::size_t kStoreMaxRequestBytes =
    2 * kStoreMaxValueBytes + kStoreMaxKeyBytes + 64;
inline constexpr std::size_t kStoreMaxBytes = std::size_t{1} << 30;  // keys and values held
inline constexpr std::size_t kStoreMaxConnections = 1024;

// Serves the store on host:port (port 0: any free port) from a thread until destroyed: on the
// addresses `host` names (the first that binds), on every interface when `host` is empty.
// Throws StoreAddressError when `host` is not an address of this machine, else StoreError.
class TcpStoreServer {
 public:
  TcpStoreServer(const std::string& host, int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }
  // What it listens on: "127.0.0.1:29500", "[::1]:29500", or "*:29500" for every interface.
  const std::string& address() const { return address_; }

 private:
  void serve();
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe that ends serve()
  int port_ = 0;
  std::string address_;
  std::thread thread_;
};

class TcpStoreClient {
 public:
  // Retries the connection until `timeout` (the server may start after its clients).
  TcpStoreClient(const std::string& host, int port, std::chrono::milliseconds timeout);
  ~TcpStoreClient();
  TcpStoreClient(const TcpStoreClient&) = delete;
  TcpStoreClient& operator=(const TcpStoreClient&) = delete;

  void set(const std::string& key, const std::vector<char>& value);
  // Waits for the key (up to the timeout), then returns its value.
  std::vector<char> get(const std::string& key);
  // Sets `desired` where the value is `expected` (or the key is absent and `expected` empty);
  // returns the value after, so the caller sees whether it won (c10d's compare_set).
  std::vector<char> compare_set(const std::string& key, const std::vector<char>& expected,
                                const std::vector<char>& desired);
  std::int64_t add(const std::string& key, std::int64_t delta);
  bool check(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The server speaks PyTorch 1.x's format (no VALIDATE): torch 1.x serves it.
  bool legacy() const { return legacy_; }

 private:
  char code(std::uint8_t query) const;  // the query's byte in the server's dialect
  void send_all(const std::vector<char>& bytes);
  void recv_all(void* out, std::size_t n, std::chrono::steady_clock::time_point deadline);
  int fd_ = -1;
  std::string where_;  // host:port, for messages
  std::chrono::milliseconds timeout_;
  bool legacy_ = false;  // the server is PyTorch <= 1.13's: no VALIDATE, codes one lower
};

}  // namespace gpuorch::comm

#pragma once
// The TCP store's state and the requests that change it, apart from the sockets: bytes a client
// sent go in, the answers go out through `send`. The server runs one per store; the fuzzers feed
// it bytes directly. Limits: tcp_store.hpp.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace gpuorch::comm {

// What a connection speaks, known from its first bytes: VALIDATE + magic (PyTorch >= 2.0, and
// gpuorch), else the format without VALIDATE (PyTorch <= 1.13, whose SET is 0: a SET whose key
// length starts with the magic's bytes, a key of 1 GB, would be taken for a VALIDATE).
enum class StoreDialect { kUnknown, kValidated, kLegacy };

class StoreImpl;

class TcpStoreState {
 public:
  using Send = std::function<void(int fd, const std::vector<char>& bytes)>;
  explicit TcpStoreState(Send send);
  ~TcpStoreState();
  TcpStoreState(const TcpStoreState&) = delete;
  TcpStoreState& operator=(const TcpStoreState&) = delete;

  // Handles every complete request in `in` (removing it) from connection `fd`; false, with
  // `why`, when the connection must be closed. An incomplete request stays in `in`.
  bool handle(int fd, std::vector<char>& in, StoreDialect& dialect, std::string& why);
  // Forgets the waits of a closed connection.
  void drop(int fd);

 private:
  std::unique_ptr<StoreImpl> impl_;
};

}  // namespace gpuorch::comm

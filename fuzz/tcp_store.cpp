// TCPStore requests as the server's state takes them from one connection, with the bytes cut into
// receives where the input says; then a second connection, in the other dialect, replays the
// same bytes against the store the first one filled. Answers go nowhere; nothing may throw.
#include <vector>

#include "fuzz_support.hpp"
#include "gpuorch/comm/tcp_store_state.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuorch::comm;
  std::size_t answered = 0;
  TcpStoreState store([&](int, const std::vector<char>& bytes) { answered += bytes.size(); });
  if (size == 0) return 0;
  const std::size_t step = 1 + data[0] % 64;  // bytes per receive
  for (int fd = 1; fd <= 2; ++fd) {
    std::vector<char> in;
    StoreDialect dialect = fd == 1 ? StoreDialect::kUnknown : StoreDialect::kLegacy;
    std::string why;
    for (std::size_t at = 1; at < size; at += step) {
      const std::size_t n = std::min(step, size - at);
      in.insert(in.end(), data + at, data + at + n);
      if (!store.handle(fd, in, dialect, why)) break;
    }
    store.drop(fd);
  }
  return 0;
}

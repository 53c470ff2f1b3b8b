#pragma once
// PyTorch's c10d TCPStore wire format, as both ends of gpuorch's store write it
// (../shared/reference/comm-launch-traces.md B4).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpuorch::comm::wire {

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
  // 9-12 (APPEND, MULTI_GET, MULTI_SET, CANCEL_WAIT) are not served.
  kPing = 13,  // PyTorch 2.x clients check a new connection with it: a u32 nonce, echoed
};
constexpr std::uint32_t kValidateMagic = 0x3C85F7CE;
constexpr std::uint8_t kReady = 0, kNotReady = 1, kStopWaiting = 0;

// PyTorch up to 1.13 speaks the same format without VALIDATE: SET=0 .. GETNUMKEYS=6, then
// WATCH_KEY=7 (not served here), DELETE_KEY=8. Those codes, from and to the ones above.
constexpr std::uint8_t kLegacyWatchKey = 7;
inline int from_legacy(std::uint8_t q) {
  if (q < kLegacyWatchKey) return q + 1;
  return q == kDeleteKey ? kDeleteKey : -1;
}
inline std::uint8_t to_legacy(Query q) {
  return static_cast<std::uint8_t>(q == kDeleteKey ? q : q - 1);
}

inline void put_u64(std::vector<char>& out, std::uint64_t v) {
  const auto* p = reinterpret_cast<const char*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}
inline void put_bytes(std::vector<char>& out, const char* data, std::size_t n) {
  put_u64(out, n);
  out.insert(out.end(), data, data + n);
}
inline void put_str(std::vector<char>& out, const std::string& s) {
  put_bytes(out, s.data(), s.size());
}

}  // namespace gpuorch::comm::wire

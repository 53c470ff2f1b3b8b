#include "gpuorch/comm/tcp_store_state.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <map>
#include <optional>

#include "gpuorch/comm/tcp_store.hpp"
#include "gpuorch/comm/tcp_store_wire.hpp"

namespace gpuorch::comm {
namespace {

using namespace wire;

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

struct Waiter {
  int fd;
  std::vector<std::string> keys;
  std::optional<std::string> get;  // a GET of a missing key answers with the value, not a byte
};

}  // namespace

// The store's state and one request at a time; lives in the server thread only. A request it
// cannot serve (unknown query, a length over the limits, ADD to a value that is not a counter or
// past the int64 range, the store full) closes its connection: the wire format has no error
// answer, and c10d's client takes a closed connection as the error.
class StoreImpl {
 public:
  explicit StoreImpl(std::function<void(int, const std::vector<char>&)> send)
      : send_(std::move(send)) {}
  // Handles every complete request in `in`; false (and `why`) when the connection must be closed.
  bool handle(int fd, std::vector<char>& in, StoreDialect& dialect, std::string& why) {
    for (;;) {
      if (dialect == StoreDialect::kUnknown) {
        if (in.empty() || (in[0] == kValidate && in.size() < 1 + sizeof kValidateMagic)) {
          return true;
        }
        std::uint32_t magic = 0;
        if (in[0] == kValidate) std::memcpy(&magic, in.data() + 1, sizeof magic);
        dialect = magic == kValidateMagic ? StoreDialect::kValidated : StoreDialect::kLegacy;
      }
      Reader r(in);
      const auto code = r.value<std::uint8_t>();
      if (!r.ok) return true;
      const int q = dialect == StoreDialect::kLegacy ? from_legacy(code) : code;
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
        case kPing: {
          const auto nonce = r.value<std::uint32_t>();
          if (!r.ok) break;
          reply.resize(sizeof nonce);
          std::memcpy(reply.data(), &nonce, sizeof nonce);
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
      if (!reply.empty()) send_(fd, reply);
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
      send_(it->fd, reply);
      it = waiters_.erase(it);
    }
  }

  std::function<void(int, const std::vector<char>&)> send_;
  std::map<std::string, std::string> kv_;
  std::size_t bytes_ = 0;  // keys and values held
  std::vector<Waiter> waiters_;
};

TcpStoreState::TcpStoreState(Send send) : impl_(std::make_unique<StoreImpl>(std::move(send))) {}
TcpStoreState::~TcpStoreState() = default;

bool TcpStoreState::handle(int fd, std::vector<char>& in, StoreDialect& dialect, std::string& why) {
  return impl_->handle(fd, in, dialect, why);
}

void TcpStoreState::drop(int fd) { impl_->drop(fd); }

}  // namespace gpuorch::comm

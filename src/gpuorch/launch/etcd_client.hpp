#pragma once
// A small etcd v3 client over etcd's HTTP/JSON gateway (/v3/kv/range, /v3/kv/put, /v3/kv/txn,
// /v3/lease/*, /v3/watch): keys and values travel base64-encoded, 64-bit integers as strings.
// Debian ships no etcd C++ client; the gateway is part of every etcd server since 3.3.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace httplib {
class Client;
}

namespace gpuorch::launch {

// etcd could not be reached or answered something unexpected.
class EtcdError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;
  std::int64_t lease = 0;
};

class EtcdClient {
 public:
  // endpoint: "host:port" or "http://host:port".
  explicit EtcdClient(const std::string& endpoint,
                      std::chrono::milliseconds request_timeout = std::chrono::seconds(5));
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  [[nodiscard]] const std::string& host() const { return host_; }
  [[nodiscard]] int port() const { return port_; }

  std::optional<KeyValue> get(const std::string& key);
  // Every key starting with `prefix`, sorted by key; also the store revision of the read.
  std::vector<KeyValue> get_prefix(const std::string& prefix, std::int64_t* revision = nullptr);
  void put(const std::string& key, const std::string& value, std::int64_t lease = 0);
  // Atomic compare-and-put: writes when the key's mod_revision is `expected_mod_revision`
  // (0 = the key must not exist). Returns whether it was written.
  bool put_if(const std::string& key, const std::string& value, std::int64_t expected_mod_revision,
              std::int64_t lease = 0);
  std::int64_t grant_lease(std::int64_t ttl_seconds);
  // False when the lease has expired (TTL 0 in the answer).
  bool keep_alive(std::int64_t lease);
  void revoke_lease(std::int64_t lease);
  // Blocks until `key` changes after `after_revision` or `wait` passes; true on a change.
  bool wait_for_change(const std::string& key, std::int64_t after_revision,
                       std::chrono::milliseconds wait);

 private:
  std::string post(const std::string& path, const std::string& body);
  std::string where(const std::string& path) const;  // "etcd at host:port/v3/kv/range"

  std::string host_;
  int port_ = 2379;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<httplib::Client> http_;
};

std::string base64_encode(const std::string& in);
std::string base64_decode(const std::string& in);

}  // namespace gpuorch::launch

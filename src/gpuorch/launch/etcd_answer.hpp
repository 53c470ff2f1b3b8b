#pragma once
// The answers of etcd's HTTP/JSON gateway, read from their bytes (apart from the client so the
// fuzzers reach them without a server). Anything unexpected (not JSON, not an object, a field of
// the wrong type, an int64 that is not one) is an EtcdError naming `where`
// ("etcd at host:port/v3/kv/range"), never another exception.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/launch/etcd_client.hpp"

namespace gpuorch::launch {

// /v3/kv/range: the first key-value (nullopt when none), or all of them and the store revision.
std::optional<KeyValue> range_first(const std::string& where, const std::string& answer);
std::vector<KeyValue> range_all(const std::string& where, const std::string& answer,
                                std::int64_t* revision);
// /v3/kv/txn: whether the comparison held and the put was done.
bool txn_succeeded(const std::string& where, const std::string& answer);
// /v3/lease/grant: the lease's ID (0 when none was granted).
std::int64_t granted_lease(const std::string& where, const std::string& answer);
// /v3/lease/keepalive: false when the lease has expired (TTL 0).
bool lease_alive(const std::string& where, const std::string& answer);
// /v3/watch, streamed: takes the complete lines out of `buffer` and says whether one of them (or
// the unterminated rest, once it parses) carries events.
bool watch_saw_change(std::string& buffer);

}  // namespace gpuorch::launch

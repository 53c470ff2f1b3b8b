#include "gpuorch/launch/etcd_client.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "gpuorch/launch/etcd_answer.hpp"

namespace gpuorch::launch {
namespace {

using Json = nlohmann::json;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The smallest key greater than every key with this prefix (etcd's range_end convention).
std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& c = prefix.back();
    if (static_cast<unsigned char>(c) < 0xff) {
      c = static_cast<char>(static_cast<unsigned char>(c) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

}  // namespace

std::string base64_encode(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64_decode(const std::string& in) {
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  for (const char c : in) {
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    if (c >= '0' && c <= '9') v = c - '0' + 52;
    if (c == '+' || c == '-') v = 62;
    if (c == '/' || c == '_') v = 63;
    if (v < 0) continue;  // '=' padding and whitespace
    buffer = (buffer << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  return out;
}

EtcdClient::EtcdClient(const std::string& endpoint, std::chrono::milliseconds request_timeout)
    : timeout_(request_timeout) {
  std::string rest = endpoint;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  if (rest.rfind("https://", 0) == 0) {
    throw EtcdError(endpoint + ": https endpoints are not supported; use http://");
  }
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const auto colon = rest.rfind(':');
  host_ = colon == std::string::npos ? rest : rest.substr(0, colon);
  if (colon != std::string::npos) {
    try {
      std::size_t used = 0;
      port_ = std::stoi(rest.substr(colon + 1), &used);
      if (used != rest.size() - colon - 1 || port_ <= 0 || port_ > 65535) throw std::exception();
    } catch (const std::exception&) {
      throw EtcdError(endpoint + ": not host:port");
    }
  }
  if (host_.empty()) throw EtcdError(endpoint + ": no host");
  http_ = std::make_unique<httplib::Client>(host_, port_);
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout_);
  const auto usecs = std::chrono::duration_cast<std::chrono::microseconds>(timeout_ - secs);
  http_->set_connection_timeout(secs.count(), usecs.count());
  http_->set_read_timeout(secs.count(), usecs.count());
  http_->set_write_timeout(secs.count(), usecs.count());
  http_->set_keep_alive(true);
}

EtcdClient::~EtcdClient() = default;

std::string EtcdClient::post(const std::string& path, const std::string& body) {
  auto res = http_->Post(path, body, "application/json");
  if (!res) {
    throw EtcdError(
        fmt::format("etcd at {}:{}: {}", host_, port_, httplib::to_string(res.error())));
  }
  if (res->status != 200) {
    throw EtcdError(fmt::format("etcd at {}:{}{}: HTTP {}: {}", host_, port_, path, res->status,
                                res->body.substr(0, 200)));
  }
  return res->body;
}

std::string EtcdClient::where(const std::string& path) const {
  return fmt::format("etcd at {}:{}{}", host_, port_, path);
}

std::optional<KeyValue> EtcdClient::get(const std::string& key) {
  const std::string path = "/v3/kv/range";
  return range_first(where(path), post(path, Json{{"key", base64_encode(key)}}.dump()));
}

std::vector<KeyValue> EtcdClient::get_prefix(const std::string& prefix, std::int64_t* revision) {
  const Json req{{"key", base64_encode(prefix)}, {"range_end", base64_encode(prefix_end(prefix))}};
  const std::string path = "/v3/kv/range";
  return range_all(where(path), post(path, req.dump()), revision);
}

void EtcdClient::put(const std::string& key, const std::string& value, std::int64_t lease) {
  Json req{{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease) req["lease"] = std::to_string(lease);
  post("/v3/kv/put", req.dump());
}

bool EtcdClient::put_if(const std::string& key, const std::string& value,
                        std::int64_t expected_mod_revision, std::int64_t lease) {
  Json compare{{"key", base64_encode(key)}, {"result", "EQUAL"}};
  if (expected_mod_revision == 0) {
    compare["target"] = "VERSION";
    compare["version"] = "0";
  } else {
    compare["target"] = "MOD";
    compare["mod_revision"] = std::to_string(expected_mod_revision);
  }
  Json put{{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease) put["lease"] = std::to_string(lease);
  const Json req{{"compare", Json::array({compare})},
                 {"success", Json::array({Json{{"request_put", put}}})}};
  const std::string path = "/v3/kv/txn";
  return txn_succeeded(where(path), post(path, req.dump()));
}

std::int64_t EtcdClient::grant_lease(std::int64_t ttl_seconds) {
  const std::string path = "/v3/lease/grant";
  const auto id = granted_lease(where(path), post(path, Json{{"TTL", ttl_seconds}}.dump()));
  if (id == 0) throw EtcdError(where(path) + ": granted no lease");
  return id;
}

bool EtcdClient::keep_alive(std::int64_t lease) {
  const std::string path = "/v3/lease/keepalive";
  return lease_alive(where(path), post(path, Json{{"ID", std::to_string(lease)}}.dump()));
}

void EtcdClient::revoke_lease(std::int64_t lease) {
  post("/v3/lease/revoke", Json{{"ID", std::to_string(lease)}}.dump());
}

bool EtcdClient::wait_for_change(const std::string& key, std::int64_t after_revision,
                                 std::chrono::milliseconds wait) {
  // A watch is a streamed response: one JSON object per event batch. A separate connection keeps
  // the shared one free, and its read timeout bounds the wait.
  httplib::Client watcher(host_, port_);
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(timeout_);
  watcher.set_connection_timeout(secs.count(), 0);
  const auto w = std::chrono::duration_cast<std::chrono::microseconds>(wait);
  watcher.set_read_timeout(w.count() / 1000000, w.count() % 1000000);
  const Json req{
      {"create_request",
       {{"key", base64_encode(key)}, {"start_revision", std::to_string(after_revision + 1)}}}};
  httplib::Request r;
  r.method = "POST";
  r.path = "/v3/watch";
  r.body = req.dump();
  r.set_header("Content-Type", "application/json");
  bool changed = false;
  std::string buffer;
  r.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    buffer.append(data, n);
    changed = watch_saw_change(buffer);
    return !changed;  // stop reading once something changed
  };
  watcher.send(r);  // ends by timeout (no change) or cancellation (change)
  return changed;
}

}  // namespace gpuorch::launch

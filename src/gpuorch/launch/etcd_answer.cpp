#include "gpuorch/launch/etcd_answer.hpp"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

namespace gpuorch::launch {
namespace {

using Json = nlohmann::json;

// A field of an answer that is not what the gateway writes; decode() says where.
struct BadField : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The gateway writes int64 fields as JSON strings and leaves out zero values.
std::int64_t int64_field(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return 0;
  const auto& v = j.at(key);
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    std::int64_t out = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) {
      throw BadField(fmt::format("\"{}\" is not a 64-bit integer: {}", key, v.dump()));
    }
    return out;
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_null()) return 0;
  throw BadField(fmt::format("\"{}\" is not a 64-bit integer: {}", key, v.dump()));
}

std::string string_field(const Json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return {};
  if (!j.at(key).is_string()) throw BadField(fmt::format("\"{}\" is not a string", key));
  return j.at(key).get<std::string>();
}

KeyValue kv_of(const Json& j) {
  if (!j.is_object()) throw BadField("a key-value is not an object");
  KeyValue kv;
  kv.key = base64_decode(string_field(j, "key"));
  kv.value = base64_decode(string_field(j, "value"));
  kv.mod_revision = int64_field(j, "mod_revision");
  kv.version = int64_field(j, "version");
  kv.lease = int64_field(j, "lease");
  return kv;
}

// The first bytes of an answer, on one line, for a message.
std::string excerpt(const std::string& text) {
  std::string out;
  for (const char c : text.substr(0, 120)) {
    const auto u = static_cast<unsigned char>(c);
    out += u >= 0x20 && u < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return text.size() > 120 ? out + "..." : out;
}

// Parses an answer of the gateway and reads it with `f`; anything unexpected (not JSON, not an
// object, a field of the wrong type or an int64 that is not one) is an EtcdError naming `where`.
template <typename F>
auto decode(const std::string& where, const std::string& text, F&& f) {
  const Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    throw EtcdError(fmt::format("{}: the answer is not a JSON object: {}", where, excerpt(text)));
  }
  try {
    return f(j);
  } catch (const BadField& e) {
    throw EtcdError(fmt::format("{}: unexpected answer: {}", where, e.what()));
  } catch (const Json::exception&) {
    throw EtcdError(fmt::format("{}: unexpected answer: {}", where, excerpt(text)));
  }
}

}  // namespace

std::optional<KeyValue> range_first(const std::string& where, const std::string& answer) {
  return decode(where, answer, [](const Json& j) -> std::optional<KeyValue> {
    if (!j.contains("kvs") || j.at("kvs").empty()) return std::nullopt;
    return kv_of(j.at("kvs").at(0));
  });
}

std::vector<KeyValue> range_all(const std::string& where, const std::string& answer,
                                std::int64_t* revision) {
  return decode(where, answer, [&](const Json& j) {
    if (revision) *revision = int64_field(j.value("header", Json::object()), "revision");
    std::vector<KeyValue> out;
    const Json kvs = j.value("kvs", Json::array());
    if (!kvs.is_array()) throw BadField("\"kvs\" is not an array");
    for (const auto& kv : kvs) out.push_back(kv_of(kv));
    return out;
  });
}

bool txn_succeeded(const std::string& where, const std::string& answer) {
  return decode(where, answer, [](const Json& j) { return j.value("succeeded", false); });
}

std::int64_t granted_lease(const std::string& where, const std::string& answer) {
  return decode(where, answer, [](const Json& j) { return int64_field(j, "ID"); });
}

bool lease_alive(const std::string& where, const std::string& answer) {
  return decode(where, answer, [](const Json& j) {
    return int64_field(j.value("result", Json::object()), "TTL") > 0;
  });
}

bool watch_saw_change(std::string& buffer) {
  bool changed = false;
  for (auto nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
    const auto line = buffer.substr(0, nl);
    buffer.erase(0, nl + 1);
    const auto j = Json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    const auto& result = j.contains("result") ? j.at("result") : j;
    if (result.contains("events") && !result.at("events").empty()) changed = true;
  }
  if (!changed && buffer.find("\"events\"") != std::string::npos) {
    const auto j = Json::parse(buffer, nullptr, false);
    if (!j.is_discarded()) changed = true;
  }
  return changed;
}

}  // namespace gpuorch::launch

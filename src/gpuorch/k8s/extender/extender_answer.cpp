#include "gpuorch/k8s/extender/extender_answer.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "gpuorch/k8s/mirror/node_object.hpp"

namespace gpuorch::k8s {

void append_json_string(std::string& out, std::string_view s) {
  // Node names and gpuorch's messages need no escaping; bytes >= 0x80 came from parsed (so
  // valid) UTF-8 or from gpuorch's own text and are written as they are.
  const bool plain = std::none_of(s.begin(), s.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\';
  });
  if (plain) {
    out += '"';
    out += s;
    out += '"';
    return;
  }
  out +=
      nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// {"node":"why",...} for every offered node but the kept one.
void append_failed(std::string& out, const FilterAnswer& a) {
  std::string why;
  append_json_string(why, a.why);
  out += '{';
  bool first = true;
  for (const std::string_view n : a.offered) {
    if (n == a.keep) continue;
    if (!first) out += ',';
    first = false;
    append_json_string(out, n);
    out += ':';
    out += why;
  }
  out += '}';
}

// Whether a node object of the request is named `name`; anything not shaped like a Node is not
// (kube-scheduler's request is a peer's text: a malformed item must not reach a const operator[]).
bool node_named(const nlohmann::json& n, std::string_view name) {
  return !name.empty() && object_name(n) == name;
}

}  // namespace

std::string filter_answer_text(const FilterAnswer& a) {
  std::string out;
  // About the name, the message and the quotes per node.
  out.reserve(64 + a.offered.size() * (24 + a.why.size()) + a.error.size());
  out += "{\"FailedNodes\":";
  if (a.unresolvable || a.why.empty() || a.keep_all) {
    out += "{}";
  } else {
    append_failed(out, a);
  }
  out += ",\"FailedAndUnresolvableNodes\":";
  if (a.unresolvable && !a.why.empty() && !a.keep_all) {
    append_failed(out, a);
  } else {
    out += "{}";
  }
  out += ",\"Error\":";
  append_json_string(out, a.error);
  // Answered in the form it was asked in.
  if (a.items == nullptr) {
    out += ",\"NodeNames\":[";
    if (a.keep_all) {
      for (std::size_t i = 0; i < a.offered.size(); ++i) {
        if (i > 0) out += ',';
        append_json_string(out, a.offered[i]);
      }
    } else if (!a.keep.empty()) {
      append_json_string(out, a.keep);
    }
    out += "],\"Nodes\":null}";
    return out;
  }
  nlohmann::json items = nlohmann::json::array();
  for (const nlohmann::json& n : *a.items) {
    if (a.keep_all || (!a.keep.empty() && node_named(n, a.keep))) items.push_back(n);
  }
  out += ",\"Nodes\":";
  out += nlohmann::json{{"metadata", nlohmann::json::object()}, {"items", std::move(items)}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  out += ",\"NodeNames\":null}";
  return out;
}

std::string priority_list_text(const std::vector<std::string_view>& offered,
                               std::string_view chosen, int top) {
  std::string out;
  out.reserve(2 + offered.size() * 32);
  out += '[';
  for (std::size_t i = 0; i < offered.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"Host\":";
    append_json_string(out, offered[i]);
    out += fmt::format(",\"Score\":{}}}", offered[i] == chosen ? top : 0);
  }
  out += ']';
  return out;
}

}  // namespace gpuorch::k8s

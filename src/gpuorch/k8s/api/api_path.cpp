#include "gpuorch/k8s/api/api_path.hpp"

#include <fmt/format.h>

#include "gpuorch/base/printable.hpp"

namespace gpuorch::k8s {
namespace {

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// One label without the length rule: alphanumerics and '-' inside.
bool label_chars(std::string_view s) {
  if (s.empty() || !lower_alnum(s.front()) || !lower_alnum(s.back())) return false;
  for (const char c : s) {
    if (!lower_alnum(c) && c != '-') return false;
  }
  return true;
}

[[noreturn]] void refuse(std::string_view s, std::string_view what, std::string_view rule) {
  throw InvalidName(
      fmt::format("{} {} is not a valid DNS-1123 {}", what, base::quoted_printable(s), rule));
}

}  // namespace

bool is_dns1123_label(std::string_view s) { return s.size() <= 63 && label_chars(s); }

bool is_dns1123_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (std::size_t start = 0;;) {
    const std::size_t dot = s.find('.', start);
    if (!label_chars(s.substr(start, dot == std::string_view::npos ? dot : dot - start))) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

void require_dns1123_label(std::string_view s, std::string_view what) {
  if (!is_dns1123_label(s)) {
    refuse(s, what, "label (lower-case letters, digits and '-', at most 63 characters)");
  }
}

void require_dns1123_subdomain(std::string_view s, std::string_view what) {
  if (!is_dns1123_subdomain(s)) {
    refuse(s, what, "subdomain (lower-case letters, digits, '-' and '.', at most 253 characters)");
  }
}

std::string percent_encode(std::string_view s) {
  if (s == "." || s == "..") return s == "." ? "%2E" : "%2E%2E";
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", u);
    }
  }
  return out;
}

std::string namespaced_path(std::string_view group_version, std::string_view ns,
                            std::string_view resource, std::string_view name) {
  require_dns1123_label(ns, "namespace");
  std::string path =
      fmt::format("{}/namespaces/{}/{}", group_version, percent_encode(ns), resource);
  if (!name.empty()) {
    require_dns1123_subdomain(name, "name");
    path += '/';
    path += percent_encode(name);
  }
  return path;
}

std::string pod_path(std::string_view ns, std::string_view name, std::string_view subresource) {
  require_dns1123_subdomain(name, "pod name");
  std::string path = namespaced_path("/api/v1", ns, "pods", name);
  if (!subresource.empty()) path += fmt::format("/{}", subresource);
  return path;
}

std::string node_path(std::string_view name, std::string_view subresource) {
  require_dns1123_subdomain(name, "node name");
  std::string path = fmt::format("/api/v1/nodes/{}", percent_encode(name));
  if (!subresource.empty()) path += fmt::format("/{}", subresource);
  return path;
}

}  // namespace gpuorch::k8s

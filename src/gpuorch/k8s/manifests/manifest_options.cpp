#include "gpuorch/k8s/manifests/manifest_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "gpuorch/base/error.hpp"
#include "gpuorch/k8s/api/quantity.hpp"

namespace gpuorch::k8s {
namespace {

bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// RFC 1123 label: what a namespace is (lower case, digits, '-', at most 63).
bool dns_label(std::string_view s) {
  if (s.empty() || s.size() > 63 || !lower_alnum(s.front()) || !lower_alnum(s.back())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) { return lower_alnum(c) || c == '-'; });
}

// RFC 1123 subdomain: what most object names are (labels joined by '.', at most 253).
bool dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = s.find('.', start);
    if (!dns_label(s.substr(start, dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// The name part of a label key and any label value: alphanumerics at both ends, '-', '_', '.'
// between, at most 63.
bool label_name(std::string_view s) {
  if (s.empty() || s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A label or taint key: [prefix/]name, the prefix a DNS subdomain.
bool qualified_name(std::string_view s) {
  const std::size_t slash = s.find('/');
  if (slash == std::string_view::npos) return label_name(s);
  return dns_subdomain(s.substr(0, slash)) && label_name(s.substr(slash + 1));
}

bool label_value(std::string_view s) { return s.empty() || label_name(s); }

struct Default {
  const char* component;
  const char* cpu;
  const char* memory;
  const char* memory_limit;
};

// The requests every component gets unless told otherwise; the memory limits keep a leaking agent
// from taking a node's memory. The scheduler's caches grow with the cluster, hence its headroom.
constexpr Default kDefaults[] = {
    {"device-plugin", "10m", "64Mi", "64Mi"},   {"exporter", "50m", "128Mi", "128Mi"},
    {"node-labeller", "10m", "64Mi", "64Mi"},   {"mps-control-daemon", "10m", "128Mi", "128Mi"},
    {"scheduler", "100m", "256Mi", "1Gi"},      {"dra-driver", "10m", "64Mi", "64Mi"},
    {"admission-check", "50m", "256Mi", "1Gi"},
};

}  // namespace

Toleration parse_toleration(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    base::fail_input(fmt::format("--toleration '{}': {}", text, why));
  };
  const std::size_t last = text.rfind(':');
  if (last == std::string_view::npos) {
    bad("use KEY=VALUE:EFFECT, KEY:EFFECT or KEY:Exists:EFFECT");
  }
  Toleration t;
  t.effect = std::string(text.substr(last + 1));
  if (t.effect != "NoSchedule" && t.effect != "PreferNoSchedule" && t.effect != "NoExecute") {
    bad("the effect must be NoSchedule, PreferNoSchedule or NoExecute");
  }
  std::string_view head = text.substr(0, last);
  if (const std::size_t colon = head.find(':'); colon != std::string_view::npos) {
    if (head.substr(colon + 1) != "Exists")
      bad("use KEY=VALUE:EFFECT, KEY:EFFECT or KEY:Exists:EFFECT");
    head = head.substr(0, colon);
  }
  if (const std::size_t eq = head.find('='); eq != std::string_view::npos) {
    if (text.find(":Exists:") != std::string_view::npos) bad("Exists takes no value");
    t.op = "Equal";
    t.value = std::string(head.substr(eq + 1));
    head = head.substr(0, eq);
    if (!label_value(t.value)) {
      bad(fmt::format("'{}' is not a valid value (at most 63 letters, digits, '-', '_', '.')",
                      t.value));
    }
  }
  t.key = std::string(head);
  if (!qualified_name(t.key)) {
    bad(fmt::format("'{}' is not a valid key ([prefix/]name, as a label key)", t.key));
  }
  return t;
}

std::pair<std::string, std::string> parse_node_selector(std::string_view text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    base::fail_input(fmt::format("--node-selector '{}': use KEY=VALUE", text));
  }
  std::pair<std::string, std::string> kv{std::string(text.substr(0, eq)),
                                         std::string(text.substr(eq + 1))};
  if (!qualified_name(kv.first)) {
    base::fail_input(
        fmt::format("--node-selector '{}': '{}' is not a valid label key", text, kv.first));
  }
  if (!label_value(kv.second)) {
    base::fail_input(
        fmt::format("--node-selector '{}': '{}' is not a valid label value", text, kv.second));
  }
  return kv;
}

void parse_resources(std::string_view text, std::string_view flag,
                     std::map<std::string, ResourceOverride>& resources) {
  const auto bad = [&](const std::string& why) {
    base::fail_input(fmt::format("{} '{}': {}", flag, text, why));
  };
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) bad("use COMPONENT:cpu=100m,memory=128Mi");
  const std::string component(text.substr(0, colon));
  if (std::none_of(std::begin(kManifestComponents), std::end(kManifestComponents),
                   [&](const char* c) { return component == c; })) {
    bad(
        fmt::format("no component '{}' (device-plugin, exporter, node-labeller, "
                    "mps-control-daemon, scheduler, dra-driver, admission-check)",
                    component));
  }
  ResourceOverride& r = resources[component];
  auto& into = flag == "--limits" ? r.limits : r.requests;
  std::string_view rest = text.substr(colon + 1);
  if (rest.empty()) bad("use COMPONENT:cpu=100m,memory=128Mi");
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) bad(fmt::format("'{}': use NAME=QUANTITY", item));
    const std::string name(item.substr(0, eq));
    const std::string quantity(item.substr(eq + 1));
    if (name != "cpu" && name != "memory" && name != "ephemeral-storage") {
      bad(fmt::format("'{}': the resource must be cpu, memory or ephemeral-storage", name));
    }
    if (!quantity_milli(quantity)) {
      bad(fmt::format("{} '{}' is not a Kubernetes quantity (100m, 0.5, 128Mi, 1Gi)", name,
                      quantity));
    }
    into[name] = quantity;
  }
}

ResourceOverride merged_resources(const PodOptions& o, const std::string& component) {
  ResourceOverride r;
  for (const auto& d : kDefaults) {
    if (component != d.component) continue;
    r.requests = {{"cpu", d.cpu}, {"memory", d.memory}};
    r.limits = {{"memory", d.memory_limit}};
  }
  if (const auto it = o.resources.find(component); it != o.resources.end()) {
    for (const auto& [k, v] : it->second.requests) r.requests[k] = v;
    for (const auto& [k, v] : it->second.limits) r.limits[k] = v;
  }
  return r;
}

std::string default_resources_text() {
  std::string out;
  for (const auto& d : kDefaults) {
    out += fmt::format("{}{} cpu={},memory={} (limits memory={})", out.empty() ? "" : "; ",
                       d.component, d.cpu, d.memory, d.memory_limit);
  }
  return out;
}

void check_pod_options(const PodOptions& o, const std::string& ns) {
  if (!dns_label(ns)) {
    base::fail_input(fmt::format(
        "--namespace '{}': not a valid namespace (lower-case letters, digits and '-', at most 63)",
        ns));
  }
  for (const auto& s : o.image_pull_secrets) {
    if (!dns_subdomain(s)) {
      base::fail_input(fmt::format("--image-pull-secret '{}': not a valid Secret name", s));
    }
  }
  if (!o.runtime_class.empty() && !dns_subdomain(o.runtime_class)) {
    base::fail_input(
        fmt::format("--runtime-class '{}': not a valid RuntimeClass name", o.runtime_class));
  }
  const std::string& p = o.image_pull_policy;
  if (!p.empty() && p != "Always" && p != "IfNotPresent" && p != "Never") {
    base::fail_input(fmt::format("--image-pull-policy '{}': use Always, IfNotPresent or Never", p));
  }
  // The API server refuses a request above its limit; say which flag to change instead.
  for (const char* component : kManifestComponents) {
    const ResourceOverride r = merged_resources(o, component);
    for (const auto& [name, limit] : r.limits) {
      const auto req = r.requests.find(name);
      if (req == r.requests.end()) continue;
      if (*quantity_milli(req->second) > *quantity_milli(limit)) {
        base::fail_input(fmt::format(
            "{}: the {} request {} is above its limit {} (set both: --requests {}:{}=... "
            "--limits {}:{}=...)",
            component, name, req->second, limit, component, name, component, name));
      }
    }
  }
}

}  // namespace gpuorch::k8s

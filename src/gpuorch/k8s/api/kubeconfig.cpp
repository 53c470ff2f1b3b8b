#include "gpuorch/k8s/api/kubeconfig.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/yaml_reader.hpp"

namespace gpuorch::k8s {
namespace {

namespace fs = std::filesystem;

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

// Strict RFC 4648 base64 (line breaks allowed, as some tools wrap long values): a lenient decoder
// would turn a truncated certificate into a TLS error far from its cause.
std::optional<std::string> base64_decode(const std::string& in) {
  std::string text;
  text.reserve(in.size());
  for (const char c : in) {
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') text.push_back(c);
  }
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  unsigned buffer = 0;
  int bits = 0;
  std::size_t padding = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    int v = -1;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    if (c >= '0' && c <= '9') v = c - '0' + 52;
    if (c == '+') v = 62;
    if (c == '/') v = 63;
    if (c == '=') {
      if (i + 2 < text.size()) return std::nullopt;  // padding only in the last two places
      ++padding;
      continue;
    }
    if (v < 0 || padding > 0) return std::nullopt;
    buffer = (buffer << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  return out;
}

// The kubeconfig's schema on the one strict YAML reader (base::YamlReader).
struct Kubeconfig : base::YamlReader {
  fs::path folder;
  YAML::Node root;

  const YAML::Node& map(const YAML::Node& n, const std::string& what) const {
    if (!n.IsMap()) fail(n, fmt::format("{} must be a mapping", what));
    return n;
  }
  // The inner map of the entry called `name` in the list `list` ("clusters", "users",
  // "contexts"); each entry is {name: ..., <kind>: {...}}.
  std::optional<YAML::Node> entry(const std::string& list, const std::string& kind,
                                  const std::string& name) const {
    const YAML::Node items = root[list];
    if (!items || items.IsNull()) return std::nullopt;
    if (!items.IsSequence()) fail(items, fmt::format("{} must be a list", list));
    for (const auto& item : items) {
      map(item, fmt::format("an entry of {}", list));
      const YAML::Node n = item["name"];
      if (!n) fail(item, fmt::format("an entry of {} has no name", list));
      if (scalar(n, "name") != name) continue;
      const YAML::Node inner = item[kind];
      if (!inner || inner.IsNull()) return YAML::Node(YAML::NodeType::Map);
      return map(inner, fmt::format("{} '{}'", kind, name));
    }
    return std::nullopt;
  }

  std::string names(const std::string& list) const {
    std::string out;
    const YAML::Node items = root[list];
    if (items && items.IsSequence()) {
      for (const auto& item : items) {
        if (item.IsMap() && item["name"] && item["name"].IsScalar()) {
          out += (out.empty() ? "" : ", ") + item["name"].Scalar();
        }
      }
    }
    return out.empty() ? "none" : out;
  }

  // The key node itself (its line is where the reader looks), or the map when it is absent.
  static YAML::Node key(const YAML::Node& map, const std::string& name) {
    for (const auto& kv : map) {
      if (kv.first.IsScalar() && kv.first.Scalar() == name) return kv.first;
    }
    return map;
  }

  fs::path resolve(const std::string& p) const {
    const fs::path path(p);
    return path.is_absolute() || folder.empty() ? path : folder / path;
  }

  std::string read_referenced(const YAML::Node& at, const std::string& key) const {
    const auto path = resolve(scalar(at, key));
    std::string problem;
    auto text = base::read_bounded(path.string(), base::kConfigFileMaxBytes, problem);
    if (!text) fail(at, fmt::format("{} '{}' {}", key, path.string(), problem));
    return std::move(*text);
  }

  // A PEM block given inline (`<key>-data`, base64) or as a file (`<key>`); empty when neither.
  std::string pem(const YAML::Node& section, const std::string& key, const char* marker,
                  const char* what) const {
    const YAML::Node data = section[key + "-data"];
    const YAML::Node path = section[key];
    if (data && path) {
      fail(data, fmt::format("both {0}-data and {0} are given; keep one", key));
    }
    std::string text;
    if (data) {
      auto decoded = base64_decode(scalar(data, key + "-data"));
      if (!decoded) fail(data, fmt::format("{}-data is not valid base64", key));
      text = std::move(*decoded);
    } else if (path) {
      text = read_referenced(path, key);
    } else {
      return {};
    }
    if (text.find(marker) == std::string::npos) {
      fail(data ? data : path, fmt::format("{}{} holds no PEM {}", key, data ? "-data" : "", what));
    }
    return text;
  }
};

}  // namespace

ClusterConfig load_kubeconfig(const std::string& path, const std::string& context) {
  Kubeconfig kc{base::YamlReader(path), fs::path(path).parent_path(), {}};
  kc.root = kc.load(base::read_input_file(path, "kubeconfig", base::kConfigFileMaxBytes));
  if (!kc.root || kc.root.IsNull()) base::fail_input(path, 1, "the kubeconfig is empty");
  kc.map(kc.root, "a kubeconfig");
  // Const access only: yaml-cpp's non-const operator[] adds the key it looks for.
  const YAML::Node& root = kc.root;

  // Which context.
  const YAML::Node current = root["current-context"];
  if (context.empty() && !current) {
    kc.fail(root, "no current-context is set and no context was asked for");
  }
  const std::string context_name =
      context.empty() ? kc.scalar(current, "current-context") : context;
  if (context_name.empty()) kc.fail(current, "current-context is empty");
  const auto ctx = kc.entry("contexts", "context", context_name);
  if (!ctx) {
    // At the name that led here: the current-context value, or the contexts list.
    kc.fail(context.empty() ? current : kc.key(root, "contexts"),
            fmt::format("context '{}' is not in the file (contexts: {})", context_name,
                        kc.names("contexts")));
  }

  ClusterConfig out;
  out.source = fmt::format("kubeconfig {} (context {})", path, context_name);
  out.default_namespace = "default";
  if (const YAML::Node ns = (*ctx)["namespace"]) {
    const auto s = kc.scalar(ns, "namespace");
    if (!s.empty()) out.default_namespace = s;
  }

  // The cluster: where, and which CA vouches for it.
  const YAML::Node cluster_ref = (*ctx)["cluster"];
  if (!cluster_ref) kc.fail(*ctx, fmt::format("context '{}' names no cluster", context_name));
  const auto cluster_name = kc.scalar(cluster_ref, "cluster");
  const auto cluster = kc.entry("clusters", "cluster", cluster_name);
  if (!cluster) {
    kc.fail(cluster_ref, fmt::format("context '{}' names cluster '{}', which is not in the file "
                                     "(clusters: {})",
                                     context_name, cluster_name, kc.names("clusters")));
  }
  const YAML::Node server = (*cluster)["server"];
  if (!server) kc.fail(*cluster, fmt::format("cluster '{}' has no server", cluster_name));
  out.server = kc.scalar(server, "server");
  if (!out.server.starts_with("https://") || out.server.size() <= 8) {
    kc.fail(server, fmt::format("server '{}' is not an https:// address: gpuorch talks to the API "
                                "server over TLS only",
                                out.server));
  }
  while (out.server.ends_with('/')) out.server.pop_back();
  if (const YAML::Node insecure = (*cluster)["insecure-skip-tls-verify"]) {
    if (kc.boolean(insecure, "insecure-skip-tls-verify")) {
      kc.fail(insecure,
              "insecure-skip-tls-verify is not supported: gpuorch always verifies the "
              "server's certificate (give certificate-authority-data)");
    }
  }
  if (const YAML::Node name = (*cluster)["tls-server-name"]) {
    kc.fail(name,
            "tls-server-name is not supported: the server's certificate must name the "
            "host in 'server'");
  }
  out.ca_pem =
      kc.pem(*cluster, "certificate-authority", "-----BEGIN CERTIFICATE-----", "certificate");

  // The user: a client certificate, a bearer token, or both.
  const YAML::Node user_ref = (*ctx)["user"];
  if (!user_ref) return out;  // anonymous
  const auto user_name = kc.scalar(user_ref, "user");
  const auto user = kc.entry("users", "user", user_name);
  if (!user) {
    kc.fail(user_ref, fmt::format("context '{}' names user '{}', which is not in the file "
                                  "(users: {})",
                                  context_name, user_name, kc.names("users")));
  }
  out.client_cert_pem =
      kc.pem(*user, "client-certificate", "-----BEGIN CERTIFICATE-----", "certificate");
  out.client_key_pem = kc.pem(*user, "client-key", "PRIVATE KEY-----", "private key");
  if (out.client_cert_pem.empty() != out.client_key_pem.empty()) {
    kc.fail(*user, fmt::format("user '{}' has a client {} but no client {}", user_name,
                               out.client_cert_pem.empty() ? "key" : "certificate",
                               out.client_cert_pem.empty() ? "certificate" : "key"));
  }
  // As in kubectl, an inline token wins over tokenFile; the file is still re-read on a 401.
  if (const YAML::Node file = (*user)["tokenFile"]) {
    // Absolute: it is read again later, perhaps after the working directory has changed.
    out.token_file = fs::absolute(kc.resolve(kc.scalar(file, "tokenFile"))).lexically_normal();
    out.bearer_token = trim(kc.read_referenced(file, "tokenFile"));
    if (out.bearer_token.empty()) {
      kc.fail(file, fmt::format("tokenFile '{}' is empty", out.token_file));
    }
  }
  if (const YAML::Node token = (*user)["token"]) out.bearer_token = kc.scalar(token, "token");
  if (const YAML::Node basic = (*user)["username"]) {
    kc.fail(basic,
            "username/password authentication was removed from Kubernetes in 1.19; use a "
            "token or a client certificate");
  }
  if (out.bearer_token.empty() && out.client_cert_pem.empty()) {
    for (const char* key : {"exec", "auth-provider"}) {
      if ((*user)[key]) {
        kc.fail(kc.key(*user, key),
                fmt::format("user '{}' gets its credentials from {}, which gpuorch does "
                            "not run; give it a token, tokenFile or client certificate",
                            user_name, key));
      }
    }
  }
  return out;
}

ClusterConfig in_cluster_config(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    base::fail_input(
        "in-cluster configuration: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not "
        "set (not running in a pod?)");
  }
  const std::string h = host;
  ClusterConfig out;
  out.server = h.find(':') != std::string::npos ? fmt::format("https://[{}]:{}", h, port)
                                                : fmt::format("https://{}:{}", h, port);
  const fs::path dir(sa_dir);
  out.token_file = fs::absolute(dir / "token").lexically_normal();
  out.bearer_token = trim(
      base::read_input_file(out.token_file, "service account token", base::kConfigFileMaxBytes));
  if (out.bearer_token.empty()) base::fail_input(out.token_file + ": the token is empty");
  const auto ca_file = (dir / "ca.crt").string();
  out.ca_pem =
      base::read_input_file(ca_file, "service account CA certificate", base::kConfigFileMaxBytes);
  if (out.ca_pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    base::fail_input(ca_file + ": holds no PEM certificate");
  }
  out.default_namespace = "default";
  if (const auto ns_file = dir / "namespace"; fs::exists(ns_file)) {
    const auto ns = trim(base::read_input_file(ns_file.string(), "service account namespace",
                                               base::kConfigFileMaxBytes));
    if (!ns.empty()) out.default_namespace = ns;
  }
  out.source = "in-cluster";
  return out;
}

ClusterConfig load_cluster_config(const std::optional<std::string>& kubeconfig_flag) {
  if (kubeconfig_flag) return load_kubeconfig(*kubeconfig_flag);
  if (const char* env = std::getenv("KUBECONFIG"); env != nullptr) {
    std::stringstream list(env);
    for (std::string item; std::getline(list, item, ':');) {
      if (!item.empty()) return load_kubeconfig(item);
    }
  }
  if (const char* host = std::getenv("KUBERNETES_SERVICE_HOST"); host != nullptr && *host) {
    return in_cluster_config();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home) {
    const auto file = fs::path(home) / ".kube" / "config";
    if (fs::exists(file)) return load_kubeconfig(file.string());
  }
  base::fail_input(
      "no Kubernetes cluster configured: give --kubeconfig FILE, set KUBECONFIG, run in a pod "
      "(KUBERNETES_SERVICE_HOST), or create ~/.kube/config");
}

}  // namespace gpuorch::k8s

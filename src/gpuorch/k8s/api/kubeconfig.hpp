#pragma once
// Where the API server is and how to prove who we are: a kubeconfig file (kubectl's format) or
// the service account Kubernetes mounts into every pod. Everything is read and checked here, once,
// so a broken file is one `file:line: what` error at start-up rather than a TLS failure later.
#include <optional>
#include <string>

namespace gpuorch::k8s {

struct ClusterConfig {
  // Each member has an initialiser so designated initialisers may leave any out (-Wextra).
  std::string server{};  // https://host:port, no trailing slash
  std::string ca_pem{};  // empty = system CAs
  std::string client_cert_pem{}, client_key_pem{};
  std::string bearer_token{};
  std::string token_file{};         // re-read when the server answers 401
  std::string source{};             // "kubeconfig FILE (context X)" or "in-cluster", for messages
  std::string default_namespace{};  // context namespace / SA namespace, "default" otherwise
};

// The context named `context`, or the file's current-context when empty. Certificates and token
// files given as paths are read now (relative paths against the kubeconfig's folder). Throws
// base::InputError "FILE:LINE: what is wrong".
ClusterConfig load_kubeconfig(const std::string& path, const std::string& context = "");

// KUBERNETES_SERVICE_HOST/PORT and the service account's token, ca.crt and namespace in `sa_dir`.
ClusterConfig in_cluster_config(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// --kubeconfig FILE when given, else $KUBECONFIG (its first file), else in-cluster when
// KUBERNETES_SERVICE_HOST is set, else ~/.kube/config when it exists; otherwise an InputError
// that says what was tried.
ClusterConfig load_cluster_config(const std::optional<std::string>& kubeconfig_flag);

}  // namespace gpuorch::k8s

#pragma once
// Who may call `gpuorch extender`'s verbs. Loopback is not authentication: any process on the
// host (any pod with hostNetwork) reached 127.0.0.1 and could bind any pending pod anywhere
// (issue 30). kube-scheduler authenticates to an extender only with TLS (extenders[].enableHTTPS
// and tlsConfig: certFile/keyFile as its client certificate, caFile to check ours), so:
// - a client certificate that the --client-ca-file CA signed (mTLS), or
// - `Authorization: Bearer <token>` with the --auth-token-file token (for callers that cannot
//   present a certificate), compared in constant time.
// With either configured, filter, prioritize and bind without valid credentials get 403 (logged
// once per address), checked on the headers before the body is read; /healthz, /readyz and
// /metrics stay open for the kubelet's probes and Prometheus.
#include <httplib.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_set>

#include "gpuorch/base/log.hpp"

namespace gpuorch::k8s {

struct ExtenderAuthOptions {
  std::string token;          // empty: no bearer token accepted
  bool client_certs = false;  // a verified client certificate is accepted (TLS with a client CA)
  base::LogSink log;          // may be empty
};

class ExtenderAuth {
 public:
  explicit ExtenderAuth(ExtenderAuthOptions options) : options_(std::move(options)) {}

  [[nodiscard]] bool configured() const { return !options_.token.empty() || options_.client_certs; }
  // telemetry::HttpLimits::admit: true to go on, false with 403 in `res`.
  bool admit(const httplib::Request& req, httplib::Response& res);

 private:
  ExtenderAuthOptions options_;
  std::mutex mutex_;
  std::unordered_set<std::string> logged_;  // peers refused, for log-once
};

// The token of --auth-token-file: its first line without surrounding blanks. Exit 2 (InputError)
// for a missing, unreadable, empty or oversized file.
std::string read_auth_token(const std::string& path);

// Makes the SSLServer's context ask for a client certificate and verify one against `ca_file`
// (PEM), without requiring one: the verbs require it (or a token), the probes do not. Exit 2
// when the file holds no usable certificate.
void accept_client_certificates(httplib::SSLServer& server, const std::string& ca_file);

}  // namespace gpuorch::k8s

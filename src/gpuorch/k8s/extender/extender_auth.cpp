#include "gpuorch/k8s/extender/extender_auth.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <array>

#include "gpuorch/base/error.hpp"
#include "gpuorch/base/printable.hpp"
#include "gpuorch/base/read_file.hpp"
#include "gpuorch/base/text_check.hpp"

namespace gpuorch::k8s {
namespace {

bool open_path(const std::string& path) {
  return path == "/healthz" || path == "/readyz" || path == "/metrics";
}

// Equal in time that depends on neither value: both are hashed, and the digests compared with
// CRYPTO_memcmp (a length difference shows only as different digests).
bool same_secret(std::string_view a, std::string_view b) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> da{}, db{};
  SHA256(reinterpret_cast<const unsigned char*>(a.data()), a.size(), da.data());
  SHA256(reinterpret_cast<const unsigned char*>(b.data()), b.size(), db.data());
  return CRYPTO_memcmp(da.data(), db.data(), da.size()) == 0;
}

bool verified_client(const httplib::Request& req) {
  const SSL* ssl = req.ssl;
  if (ssl == nullptr) return false;
  const X509* cert = SSL_get0_peer_certificate(ssl);
  return cert != nullptr && SSL_get_verify_result(ssl) == X509_V_OK;
}

}  // namespace

bool ExtenderAuth::admit(const httplib::Request& req, httplib::Response& res) {
  if (!configured() || open_path(req.path)) return true;
  if (options_.client_certs && verified_client(req)) return true;
  if (!options_.token.empty()) {
    const std::string& header = req.get_header_value("Authorization");
    constexpr std::string_view kBearer = "Bearer ";
    if (header.size() > kBearer.size() && header.compare(0, kBearer.size(), kBearer) == 0 &&
        same_secret(std::string_view(header).substr(kBearer.size()), options_.token)) {
      return true;
    }
  }
  const std::string what =
      options_.client_certs && !options_.token.empty()
          ? "a client certificate from --client-ca-file's CA or the --auth-token-file bearer token"
      : options_.client_certs ? "a client certificate from --client-ca-file's CA"
                              : "the --auth-token-file bearer token";
  res.status = 403;
  res.set_content(fmt::format("{} needs {}\n", base::printable(req.path), what), "text/plain");
  bool first = false;
  {
    const std::lock_guard lock(mutex_);
    first = logged_.size() < 4096 && logged_.insert(req.remote_addr).second;
  }
  if (first && options_.log) {
    options_.log(base::Severity::kWarning,
                 fmt::format("refused {} from {}: no valid credentials ({}); logged once per "
                             "address",
                             base::printable(req.path), base::printable(req.remote_addr), what),
                 base::SourceLocation::current());
  }
  return false;
}

std::string read_auth_token(const std::string& path) {
  constexpr std::size_t kMax = 4096;
  // The one bounded reader: /dev/zero, a FIFO or a folder is refused at once, a huge file not
  // read whole.
  const std::string text =
      base::read_input_file(path, "auth token file", base::kConfigFileMaxBytes);
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > kMax) {
    base::fail_input(fmt::format("{}:1: the token is longer than {} bytes", path, kMax));
  }
  const auto first = line.find_first_not_of(" \t\r");
  const auto last = line.find_last_not_of(" \t\r");
  if (first == std::string::npos) {
    base::fail_input(fmt::format("{}:1: the token file's first line is empty", path));
  }
  line = line.substr(first, last - first + 1);
  if (base::find_control(line) != std::string_view::npos) {
    base::fail_input(fmt::format("{}:1: the token holds a control character", path));
  }
  return line;
}

void accept_client_certificates(httplib::SSLServer& server, const std::string& ca_file) {
  SSL_CTX* ctx = server.ssl_context();
  STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca_file.c_str());
  if (ctx == nullptr || names == nullptr ||
      SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
    if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
    base::fail_input(
        fmt::format("--client-ca-file {}: not a PEM file of CA certificates", ca_file));
  }
  // The CAs named in the handshake's CertificateRequest: Go's TLS client (kube-scheduler) sends
  // a certificate only when its issuer is among them.
  SSL_CTX_set_client_CA_list(ctx, names);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
}

}  // namespace gpuorch::k8s

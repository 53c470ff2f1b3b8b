#pragma once
// A stand-in HTTPS server for the API client's unit tests: certificates made by openssl for this
// process (a CA, a server certificate for the IP 127.0.0.1, one naming only example.com, a client
// certificate, and a second CA that vouches for nothing here), and cpp-httplib's SSLServer on a
// loopback port with handlers the test writes. The real kube-apiserver tests are in
// api_client_test.cpp; this is for what a real server will not do on demand (410 in the middle
// of a watch, garbage, endless lines, huge bodies).
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "gpuorch/k8s/api/kubeconfig.hpp"
#include "support/test_support.hpp"

namespace gpuorch::test {

struct TlsFiles {
  TempDir dir;
  std::string path(const std::string& name) const { return dir.file(name); }
  std::string pem(const std::string& name) const { return read_text(dir.file(name)); }
};

// Made once per process (openssl takes a moment per key).
inline const TlsFiles& tls_files() {
  static TlsFiles f;
  static const bool made = [] {
    const std::string script = R"(set -e
key() { openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "$@"; }
key -x509 -keyout ca.key -out ca.crt -days 2 -subj /CN=gpuorch-test-ca
key -x509 -keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=gpuorch-other-ca
sign() { openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
  -out "$1.crt" -extfile "$2"; }
printf 'subjectAltName=IP:127.0.0.1\n' > ip.ext
printf 'subjectAltName=DNS:example.com\n' > dns.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
key -keyout server.key -out server.csr -subj /CN=127.0.0.1 && sign server ip.ext
key -keyout wronghost.key -out wronghost.csr -subj /CN=example.com && sign wronghost dns.ext
key -keyout client.key -out client.csr -subj /CN=alice && sign client client.ext
)";
    write_text(f.path("make.sh"), script);
    const auto cmd = "cd '" + f.dir.path().string() + "' && sh make.sh > make.log 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      throw std::runtime_error("openssl could not make the test certificates: " +
                               read_text(f.path("make.log")));
    }
    return true;
  }();
  (void)made;
  return f;
}

// An HTTPS server on 127.0.0.1; handlers are added before start().
class FakeApiServer {
 public:
  // cert: "server" (IP SAN 127.0.0.1) or "wronghost"; require_client_cert: only clients with a
  // certificate from the test CA get through the handshake.
  explicit FakeApiServer(const std::string& cert = "server", bool require_client_cert = false)
      : server_(tls_files().path(cert + ".crt").c_str(), tls_files().path(cert + ".key").c_str(),
                require_client_cert ? tls_files().path("ca.crt").c_str() : nullptr) {
    if (!server_.is_valid()) throw std::runtime_error("httplib could not load the test certs");
    // Idle keep-alive connections and open watches each hold a thread.
    server_.new_task_queue = [] { return new httplib::ThreadPool(32); };
  }
  ~FakeApiServer() {
    stopping_ = true;
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  httplib::Server& http() { return server_; }

  void start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw std::runtime_error("no loopback port for the fake API server");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] std::string server() const { return "https://127.0.0.1:" + std::to_string(port_); }
  // Trusts the test CA and nothing else; no credentials.
  [[nodiscard]] k8s::ClusterConfig config() const {
    k8s::ClusterConfig c;
    c.server = server();
    c.ca_pem = tls_files().pem("ca.crt");
    c.source = "fake API server";
    c.default_namespace = "default";
    return c;
  }
  // True once the test is tearing the server down: streaming handlers must return then.
  [[nodiscard]] bool stopping() const { return stopping_.load(); }

  // A streamed answer that writes `first` and then stays open, silent, until teardown.
  void stream_then_idle(httplib::Response& res, std::string first) {
    res.set_chunked_content_provider(
        "application/json", [this, first = std::move(first), sent = false](
                                std::size_t, httplib::DataSink& sink) mutable {
          if (!sent) {
            sent = true;
            if (!first.empty() && !sink.write(first.data(), first.size())) return false;
          }
          if (stopping()) return false;
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return true;
        });
  }

 private:
  httplib::SSLServer server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
};

// Waits up to `timeout` for `done`, looking every 10 ms.
inline bool eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace gpuorch::test

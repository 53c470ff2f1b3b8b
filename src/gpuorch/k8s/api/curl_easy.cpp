#include "gpuorch/k8s/api/curl_easy.hpp"

#include <fmt/format.h>

#include <cstring>
#include <mutex>

namespace gpuorch::k8s::curl {
namespace {

void append(Slist& list, const std::string& header) {
  curl_slist* grown = curl_slist_append(list.get(), header.c_str());
  if (grown == nullptr) throw std::bad_alloc();
  (void)list.release();  // curl_slist_append returns the same head, now one longer
  list.reset(grown);
}

void set_blob(CURL* h, CURLoption option, const std::string& pem) {
  curl_blob blob{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
  set(h, option, &blob);
}

}  // namespace

Easy make_easy() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw std::runtime_error("libcurl failed to initialise");
    }
  });
  Easy h(curl_easy_init());
  if (!h) throw std::runtime_error("libcurl could not create a handle");
  return h;
}

Slist configure(CURL* h, const ClusterConfig& config, const Request& r, char* errbuf) {
  errbuf[0] = '\0';
  set(h, CURLOPT_ERRORBUFFER, errbuf);
  set(h, CURLOPT_URL, r.url.c_str());
  set(h, CURLOPT_PROTOCOLS_STR, "https");
  set(h, CURLOPT_NOSIGNAL, 1L);  // several threads; timeouts must not use SIGALRM
  // One request per connection: a pooled handle's connection is its own, and a watch never
  // queues behind (or holds up) other calls the way HTTP/2 streams on one connection would.
  set(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  set(h, CURLOPT_USERAGENT, "gpuorch/" GPUORCH_VERSION);

  // TLS: always verified. The server's certificate must chain to the configured CA (and only to
  // it: the system's CA directory is switched off) and name the host, IP SANs included.
  set(h, CURLOPT_SSL_VERIFYPEER, 1L);
  set(h, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!config.ca_pem.empty()) {
    set_blob(h, CURLOPT_CAINFO_BLOB, config.ca_pem);  // overrides the CA bundle file
    set(h, CURLOPT_CAPATH, static_cast<char*>(nullptr));
  }
  if (!config.client_cert_pem.empty()) {
    set_blob(h, CURLOPT_SSLCERT_BLOB, config.client_cert_pem);
    set(h, CURLOPT_SSLCERTTYPE, "PEM");
    set_blob(h, CURLOPT_SSLKEY_BLOB, config.client_key_pem);
    set(h, CURLOPT_SSLKEYTYPE, "PEM");
  }

  set(h, CURLOPT_CONNECTTIMEOUT_MS, r.connect_timeout_ms);
  set(h, CURLOPT_TIMEOUT_MS, r.timeout_ms);
  // A watch may be silent for minutes; keep-alive probes notice a peer that vanished.
  set(h, CURLOPT_TCP_KEEPALIVE, 1L);
  set(h, CURLOPT_TCP_KEEPIDLE, 30L);
  set(h, CURLOPT_TCP_KEEPINTVL, 10L);
  if (r.compressed) set(h, CURLOPT_ACCEPT_ENCODING, "gzip");

  Slist headers;
  append(headers, "Accept: application/json");
  append(headers, "Expect:");  // no 100-continue round trip before large bodies
  if (!r.token.empty()) append(headers, "Authorization: Bearer " + r.token);
  if (r.body != nullptr) append(headers, fmt::format("Content-Type: {}", r.content_type));

  if (r.method == "GET") {
    set(h, CURLOPT_HTTPGET, 1L);
  } else {
    set(h, CURLOPT_CUSTOMREQUEST, std::string(r.method).c_str());  // copied by libcurl
    if (r.body != nullptr) {
      set(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body->size()));
      set(h, CURLOPT_POSTFIELDS, r.body->data());
    }
  }
  set(h, CURLOPT_HTTPHEADER, headers.get());
  return headers;
}

std::string transport_error(CURL* h, CURLcode rc, const char* errbuf, const std::string& server,
                            std::string_view method, const std::string& path) {
  std::string detail = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
  switch (rc) {
    case CURLE_COULDNT_CONNECT: {
      long os_errno = 0;
      curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
      if (os_errno != 0) detail = std::strerror(static_cast<int>(os_errno));
      return fmt::format("cannot reach {}: {}", server, detail);
    }
    case CURLE_COULDNT_RESOLVE_HOST:
      return fmt::format("cannot reach {}: {}", server, detail);
    case CURLE_OPERATION_TIMEDOUT:
      return fmt::format("{} {}{}: no answer in time ({})", method, server, path, detail);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
      return fmt::format("TLS with {} failed: {}", server, detail);
    default:
      return fmt::format("{} {}{}: {}", method, server, path, detail);
  }
}

}  // namespace gpuorch::k8s::curl

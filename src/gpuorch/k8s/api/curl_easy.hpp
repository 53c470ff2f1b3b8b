#pragma once
// libcurl plumbing for ApiClient: owning handles, and the one function that sets up TLS and
// authentication, so calls and watches can never differ in what they verify.
#include <curl/curl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "gpuorch/k8s/api/kubeconfig.hpp"

namespace gpuorch::k8s::curl {

struct EasyDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
using Easy = std::unique_ptr<CURL, EasyDeleter>;
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;
struct MultiDeleter {
  void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};
using Multi = std::unique_ptr<CURLM, MultiDeleter>;

// A new handle (libcurl initialised on first use); throws when libcurl cannot make one.
Easy make_easy();

template <typename T>
void set(CURL* h, CURLoption option, T value) {
  const CURLcode rc = curl_easy_setopt(h, option, value);
  if (rc != CURLE_OK) {
    throw std::runtime_error(std::string("libcurl refused an option: ") + curl_easy_strerror(rc));
  }
}

struct Request {
  std::string_view method;
  std::string url;
  const std::string* body = nullptr;  // must outlive the transfer
  std::string_view content_type;
  std::string token;
  long connect_timeout_ms = 5000;
  long timeout_ms = 0;  // 0: none (watches)
  // gzip for whole answers (lists compress well; limits count decoded bytes). Not for watches:
  // a compressor between us and the server would hold events back until its buffer fills.
  bool compressed = true;
};

// Sets everything but the write callback on a fresh (or reset) handle: URL, method and body,
// https only, peer and host name verification, the CA, the client certificate, the headers,
// timeouts and TCP keep-alive. The returned header list must outlive the transfer. `errbuf` is
// CURL_ERROR_SIZE bytes.
Slist configure(CURL* h, const ClusterConfig& config, const Request& r, char* errbuf);

// One line for a failed transfer: "cannot reach https://host:port: Connection refused",
// "TLS with https://host:port failed: SSL certificate problem: ...".
std::string transport_error(CURL* h, CURLcode rc, const char* errbuf, const std::string& server,
                            std::string_view method, const std::string& path);

}  // namespace gpuorch::k8s::curl

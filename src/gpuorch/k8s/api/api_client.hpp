#pragma once
// A small Kubernetes API client over libcurl: JSON in and out, TLS always verified, a bearer
// token or a client certificate, and watches streamed line by line. The scheduler, the extender
// and the informer cache share it; it knows paths, not resource types.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "gpuorch/k8s/api/kubeconfig.hpp"

namespace gpuorch::k8s {

struct ApiResponse {
  long status = 0;
  std::string body{};
};

// A non-2xx answer: the status code and the Status object's reason and message
// (`pods "x" not found`). what() is "METHOD PATH: CODE REASON: message".
class ApiError : public std::runtime_error {
 public:
  ApiError(long status, std::string reason, std::string message, const std::string& what)
      : std::runtime_error(what),
        status_(status),
        reason_(std::move(reason)),
        message_(std::move(message)) {}
  // From the raw answer; a body that is not a Status still gives a readable message.
  static ApiError from_response(std::string_view method, const std::string& path, long status,
                                const std::string& body);

  [[nodiscard]] long status() const { return status_; }
  [[nodiscard]] const std::string& reason() const { return reason_; }    // "NotFound", "Conflict"
  [[nodiscard]] const std::string& message() const { return message_; }  // the server's words

 private:
  long status_;
  std::string reason_;
  std::string message_;
};

// Bounds on what one answer may cost, so a broken or hostile server cannot exhaust memory or
// hang a caller.
struct ApiClientOptions {
  std::size_t max_body_bytes = std::size_t{64} << 20;        // a whole answer (lists included)
  std::size_t max_watch_line_bytes = std::size_t{16} << 20;  // one watch event
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{30000};  // every call but watch
  // When set and true, every transfer in flight ends within about a second and new calls fail at
  // once: a stopping process (SIGTERM) must not wait out a slow list's request timeout.
  const std::atomic<bool>* cancel = nullptr;
};

// What a call that `ApiClientOptions::cancel` ended throws.
class ApiCancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ApiClient {
 public:
  // Thread-safe: a pool of libcurl handles, one per concurrent caller, each keeping its
  // connection alive between calls.
  explicit ApiClient(ClusterConfig config, ApiClientOptions options = {});
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // Each throws ApiError on a non-2xx answer and std::runtime_error when the server cannot be
  // reached, the TLS handshake fails, or the answer is too large or not JSON.
  nlohmann::json get(const std::string& path);
  // POST; dry_run asks for a server-side dry run (?dryRun=All): validated, admitted, not stored.
  nlohmann::json create(const std::string& collection_path, const nlohmann::json& obj,
                        bool dry_run = false);
  // PUT; a stale metadata.resourceVersion answers 409 Conflict.
  nlohmann::json replace(const std::string& path, const nlohmann::json& obj);
  nlohmann::json patch(const std::string& path, const nlohmann::json& patch,
                       std::string_view content_type = "application/merge-patch+json");
  void remove(const std::string& path);  // DELETE
  // The raw form: any status is returned, only transport failures throw. A 401 when the token
  // comes from a file re-reads the file once (service-account tokens rotate) and retries.
  ApiResponse request(std::string_view method, const std::string& path, const std::string* body,
                      std::string_view content_type);

  // Streams a watch (`path` already carries ?watch=1...): on_event gets each JSON line. Returns
  // when the server ends the stream, when on_event returns false, or within about 200 ms of
  // `stop` becoming true. Throws ApiError when the answer's status is not 200.
  void watch(const std::string& path,
             const std::function<bool(const nlohmann::json& event)>& on_event,
             const std::atomic<bool>& stop);

  [[nodiscard]] const ClusterConfig& config() const { return config_; }

 private:
  struct Pool;
  [[nodiscard]] std::string token() const;
  bool reload_token();  // true when the file held a new token
  ApiResponse request_once(std::string_view method, const std::string& path,
                           const std::string* body, std::string_view content_type);
  long watch_once(const std::string& path,
                  const std::function<bool(const nlohmann::json& event)>& on_event,
                  const std::atomic<bool>& stop, std::string& error_body);
  nlohmann::json json_call(std::string_view method, const std::string& path,
                           const std::string* body, std::string_view content_type);

  ClusterConfig config_;
  ApiClientOptions options_;
  std::unique_ptr<Pool> pool_;
  mutable std::mutex token_mutex_;
  std::string token_;
};

// Read-modify-write with optimistic concurrency: GET, mutate(obj), PUT (the object keeps the
// resourceVersion it was read at, so a concurrent write makes the PUT fail with 409); retried up
// to `attempts` times, then the last ApiError(409) is thrown.
nlohmann::json update_with_retry(ApiClient& api, const std::string& path,
                                 const std::function<void(nlohmann::json&)>& mutate,
                                 int attempts = 5);

}  // namespace gpuorch::k8s

#include "gpuorch/k8s/api/api_client.hpp"

#include <fmt/format.h>

#include <cctype>
#include <vector>

#include "gpuorch/base/read_file.hpp"
#include "gpuorch/k8s/api/curl_easy.hpp"
#include "gpuorch/k8s/api/server_json.hpp"

namespace gpuorch::k8s {
namespace {

// The server's words go into one-line messages: no control characters, bounded length.
std::string one_line(std::string_view s, std::size_t limit = 300) {
  std::string out(s.substr(0, limit));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  if (s.size() > limit) out += "...";
  return out;
}

std::string string_field(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A rotated token, re-read after a 401: bounded as the kubeconfig's files are (a path that
// became /dev/zero or a FIFO must not exhaust memory or hang a call); unreadable reads as none.
std::string read_token_file(const std::string& path) {
  std::string problem;
  std::string token =
      base::read_bounded(path, base::kConfigFileMaxBytes, problem).value_or(std::string());
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
    token.pop_back();
  }
  return token;
}

struct BoundedBody {
  std::string text;
  std::size_t limit = 0;
  bool too_large = false;
};

std::size_t write_bounded(char* data, std::size_t size, std::size_t n, void* user) {
  auto* body = static_cast<BoundedBody*>(user);
  const std::size_t bytes = size * n;
  if (body->text.size() + bytes > body->limit) {
    body->too_large = true;
    return CURL_WRITEFUNC_ERROR;
  }
  body->text.append(data, bytes);
  return bytes;
}

// libcurl calls this at least about once a second, and at every chunk moved: a non-zero answer ends
// the transfer (CURLE_ABORTED_BY_CALLBACK).
int abort_when_cancelled(void* cancel, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(cancel)->load() ? 1 : 0;
}

void check_path(const std::string& path) {
  if (path.empty() || path.front() != '/') {
    throw std::invalid_argument("ApiClient: path '" + path + "' must start with '/'");
  }
}

}  // namespace

ApiError ApiError::from_response(std::string_view method, const std::string& path, long status,
                                 const std::string& body) {
  std::string reason;
  std::string message;
  try {
    const auto j = parse_server_json(body, path);
    if (j.is_object() && string_field(j, "kind") == "Status") {
      reason = string_field(j, "reason");
      message = string_field(j, "message");
    }
  } catch (const std::exception&) {
    // Not a Status (a proxy's HTML page, an empty body): the raw text below says enough.
  }
  if (message.empty()) message = body.empty() ? "(empty answer)" : body;
  message = one_line(message);
  const auto what = reason.empty()
                        ? fmt::format("{} {}: HTTP {}: {}", method, path, status, message)
                        : fmt::format("{} {}: {} {}: {}", method, path, status, reason, message);
  return {status, std::move(reason), std::move(message), what};
}

// Idle handles; a caller takes one (or makes one) and puts it back, so the pool grows to the
// number of concurrent callers and each handle keeps its connection alive.
struct ApiClient::Pool {
  std::mutex mutex;
  std::vector<curl::Easy> idle;

  curl::Easy take() {
    {
      const std::lock_guard lock(mutex);
      if (!idle.empty()) {
        auto h = std::move(idle.back());
        idle.pop_back();
        return h;
      }
    }
    return curl::make_easy();
  }
  void put_back(curl::Easy h) {
    const std::lock_guard lock(mutex);
    idle.push_back(std::move(h));
  }
};

ApiClient::ApiClient(ClusterConfig config, ApiClientOptions options)
    : config_(std::move(config)),
      options_(options),
      pool_(std::make_unique<Pool>()),
      token_(config_.bearer_token) {
  if (!config_.server.starts_with("https://")) {
    throw std::invalid_argument("ApiClient: server '" + config_.server +
                                "' is not an https:// address");
  }
  while (config_.server.ends_with('/')) config_.server.pop_back();
}

ApiClient::~ApiClient() = default;

std::string ApiClient::token() const {
  const std::lock_guard lock(token_mutex_);
  return token_;
}

bool ApiClient::reload_token() {
  auto fresh = read_token_file(config_.token_file);
  const std::lock_guard lock(token_mutex_);
  if (fresh.empty() || fresh == token_) return false;
  token_ = std::move(fresh);
  return true;
}

ApiResponse ApiClient::request_once(std::string_view method, const std::string& path,
                                    const std::string* body, std::string_view content_type) {
  auto handle = pool_->take();
  CURL* h = handle.get();
  curl_easy_reset(h);  // keeps the live connection
  char errbuf[CURL_ERROR_SIZE];
  curl::Request r;
  r.method = method;
  r.url = config_.server + path;
  r.body = body;
  r.content_type = content_type;
  r.token = token();
  r.connect_timeout_ms = static_cast<long>(options_.connect_timeout.count());
  r.timeout_ms = static_cast<long>(options_.request_timeout.count());
  const auto headers = curl::configure(h, config_, r, errbuf);
  BoundedBody answer;
  answer.limit = options_.max_body_bytes;
  curl::set(h, CURLOPT_WRITEFUNCTION, &write_bounded);
  curl::set(h, CURLOPT_WRITEDATA, static_cast<void*>(&answer));
  if (options_.cancel != nullptr) {
    curl::set(h, CURLOPT_NOPROGRESS, 0L);
    curl::set(h, CURLOPT_XFERINFOFUNCTION, &abort_when_cancelled);
    curl::set(h, CURLOPT_XFERINFODATA,
              const_cast<void*>(static_cast<const void*>(options_.cancel)));
  }
  const CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_ABORTED_BY_CALLBACK) {
    pool_->put_back(std::move(handle));
    throw ApiCancelled(fmt::format("{} {}: cancelled (stopping)", method, path));
  }
  if (answer.too_large) {
    pool_->put_back(std::move(handle));
    throw std::runtime_error(fmt::format("{} {}{}: the answer is larger than {} bytes; refused",
                                         method, config_.server, path, options_.max_body_bytes));
  }
  if (rc != CURLE_OK) {
    auto message = curl::transport_error(h, rc, errbuf, config_.server, method, path);
    pool_->put_back(std::move(handle));
    throw std::runtime_error(message);
  }
  ApiResponse out;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out.status);
  out.body = std::move(answer.text);
  pool_->put_back(std::move(handle));
  return out;
}

ApiResponse ApiClient::request(std::string_view method, const std::string& path,
                               const std::string* body, std::string_view content_type) {
  check_path(path);
  if (options_.cancel != nullptr && options_.cancel->load()) {
    throw ApiCancelled(fmt::format("{} {}: cancelled (stopping)", method, path));
  }
  auto res = request_once(method, path, body, content_type);
  if (res.status == 401 && !config_.token_file.empty() && reload_token()) {
    res = request_once(method, path, body, content_type);
  }
  return res;
}

nlohmann::json ApiClient::json_call(std::string_view method, const std::string& path,
                                    const std::string* body, std::string_view content_type) {
  const auto res = request(method, path, body, content_type);
  if (res.status < 200 || res.status > 299) {
    throw ApiError::from_response(method, path, res.status, res.body);
  }
  return parse_server_json(res.body, fmt::format("{} {}{}", method, config_.server, path));
}

namespace {
// Objects that came from the server may carry strings that are not UTF-8; they go back as
// replacement characters instead of failing the write.
std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
}  // namespace

nlohmann::json ApiClient::get(const std::string& path) {
  return json_call("GET", path, nullptr, {});
}

nlohmann::json ApiClient::create(const std::string& collection_path, const nlohmann::json& obj,
                                 bool dry_run) {
  std::string path = collection_path;
  if (dry_run) {
    // Appended in two steps: GCC 12 reports a false -Wrestrict for "?" + std::string(...).
    path += path.find('?') == std::string::npos ? '?' : '&';
    path += "dryRun=All";
  }
  const auto body = dump(obj);
  return json_call("POST", path, &body, "application/json");
}

nlohmann::json ApiClient::replace(const std::string& path, const nlohmann::json& obj) {
  const auto body = dump(obj);
  return json_call("PUT", path, &body, "application/json");
}

nlohmann::json ApiClient::patch(const std::string& path, const nlohmann::json& patch,
                                std::string_view content_type) {
  const auto body = dump(patch);
  return json_call("PATCH", path, &body, content_type);
}

void ApiClient::remove(const std::string& path) {
  const auto res = request("DELETE", path, nullptr, {});
  if (res.status < 200 || res.status > 299) {
    throw ApiError::from_response("DELETE", path, res.status, res.body);
  }
}

nlohmann::json update_with_retry(ApiClient& api, const std::string& path,
                                 const std::function<void(nlohmann::json&)>& mutate, int attempts) {
  for (int attempt = 1;; ++attempt) {
    auto obj = api.get(path);
    mutate(obj);
    try {
      return api.replace(path, obj);
    } catch (const ApiError& e) {
      if (e.status() != 409 || attempt >= attempts) throw;
    }
  }
}

}  // namespace gpuorch::k8s

// ApiClient::watch: a streamed GET read through libcurl's multi interface, so the caller's stop
// flag is looked at every 200 ms however quiet the stream is (the easy interface's progress
// callback slows to about once a second on an idle connection).
#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/curl_easy.hpp"
#include "gpuorch/k8s/api/server_json.hpp"

namespace gpuorch::k8s {
namespace {

constexpr int kPollMs = 200;
constexpr std::size_t kMaxErrorBody = std::size_t{1} << 20;

// Splits the stream into lines and hands each event on. Runs inside libcurl's callback, so
// nothing may escape it: the first exception is kept and thrown once the transfer has ended.
struct WatchSink {
  CURL* handle = nullptr;
  const std::function<bool(const nlohmann::json&)>* on_event = nullptr;
  std::size_t max_line = 0;
  std::string what;  // "watch https://host/path", for messages
  long status = 0;
  std::string partial;     // the line not yet ended by '\n'
  std::string error_body;  // a non-200 answer, bounded
  bool stopped_by_handler = false;
  std::exception_ptr error;

  // False when the handler wants no more events.
  bool deliver(std::string_view line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) return true;
    return (*on_event)(parse_server_json(line, what));
  }
  void check_size(std::size_t bytes) const {
    if (bytes > max_line) {
      throw std::runtime_error(
          fmt::format("{}: an event is larger than {} bytes; refused", what, max_line));
    }
  }

  std::size_t receive(const char* data, std::size_t n) {
    if (status == 0) curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
      error_body.append(data,
                        std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, error_body.size())));
      return n;
    }
    try {
      std::string_view chunk(data, n);
      for (auto nl = chunk.find('\n'); nl != std::string_view::npos; nl = chunk.find('\n')) {
        check_size(partial.size() + nl);
        bool more = true;
        if (partial.empty()) {
          more = deliver(chunk.substr(0, nl));
        } else {
          partial.append(chunk.substr(0, nl));
          more = deliver(partial);
          partial.clear();
        }
        chunk.remove_prefix(nl + 1);
        if (!more) {
          stopped_by_handler = true;
          return CURL_WRITEFUNC_ERROR;
        }
      }
      check_size(partial.size() + chunk.size());
      partial.append(chunk);
    } catch (...) {
      error = std::current_exception();
      return CURL_WRITEFUNC_ERROR;
    }
    return n;
  }
};

std::size_t write_watch(char* data, std::size_t size, std::size_t n, void* user) {
  return static_cast<WatchSink*>(user)->receive(data, size * n);
}

}  // namespace

long ApiClient::watch_once(const std::string& path,
                           const std::function<bool(const nlohmann::json& event)>& on_event,
                           const std::atomic<bool>& stop, std::string& error_body) {
  // A handle of its own: the stream holds its connection for minutes.
  auto handle = curl::make_easy();
  CURL* h = handle.get();
  char errbuf[CURL_ERROR_SIZE];
  curl::Request r;
  r.method = "GET";
  r.url = config_.server + path;
  r.token = token();
  r.connect_timeout_ms = static_cast<long>(options_.connect_timeout.count());
  r.timeout_ms = 0;  // the server ends the stream (timeoutSeconds); `stop` ends it early
  r.compressed = false;
  const auto headers = curl::configure(h, config_, r, errbuf);
  WatchSink sink;
  sink.handle = h;
  sink.on_event = &on_event;
  sink.max_line = options_.max_watch_line_bytes;
  sink.what = "watch " + config_.server + path;
  curl::set(h, CURLOPT_WRITEFUNCTION, &write_watch);
  curl::set(h, CURLOPT_WRITEDATA, static_cast<void*>(&sink));

  curl::Multi multi(curl_multi_init());
  if (!multi) throw std::runtime_error("libcurl could not create a multi handle");
  if (curl_multi_add_handle(multi.get(), h) != CURLM_OK) {
    throw std::runtime_error("libcurl could not start a watch");
  }
  struct Detach {
    CURLM* m;
    CURL* e;
    ~Detach() { curl_multi_remove_handle(m, e); }
  } detach{multi.get(), h};

  CURLcode result = CURLE_OK;
  for (int running = 1; running > 0;) {
    if (stop.load() || (options_.cancel != nullptr && options_.cancel->load())) return 200;
    if (const auto mc = curl_multi_perform(multi.get(), &running); mc != CURLM_OK) {
      throw std::runtime_error(fmt::format("{}: {}", sink.what, curl_multi_strerror(mc)));
    }
    if (running > 0) curl_multi_poll(multi.get(), nullptr, 0, kPollMs, nullptr);
  }
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi.get(), &left)) {
    if (msg->msg == CURLMSG_DONE) result = msg->data.result;
  }

  if (sink.error) std::rethrow_exception(sink.error);
  if (sink.stopped_by_handler) return 200;
  if (sink.status == 0) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &sink.status);
  if (sink.status != 0 && sink.status != 200) {
    error_body = std::move(sink.error_body);
    return sink.status;
  }
  if (result != CURLE_OK) {
    throw std::runtime_error(
        curl::transport_error(h, result, errbuf, config_.server, "watch", path));
  }
  if (!sink.partial.empty()) {  // a last event without its newline
    const std::string last = std::move(sink.partial);
    sink.deliver(last);
  }
  return 200;
}

void ApiClient::watch(const std::string& path,
                      const std::function<bool(const nlohmann::json& event)>& on_event,
                      const std::atomic<bool>& stop) {
  if (path.empty() || path.front() != '/') {
    throw std::invalid_argument("ApiClient: path '" + path + "' must start with '/'");
  }
  std::string error_body;
  long status = watch_once(path, on_event, stop, error_body);
  if (status == 401 && !config_.token_file.empty() && reload_token()) {
    error_body.clear();
    status = watch_once(path, on_event, stop, error_body);
  }
  if (status != 200) throw ApiError::from_response("watch", path, status, error_body);
}

}  // namespace gpuorch::k8s

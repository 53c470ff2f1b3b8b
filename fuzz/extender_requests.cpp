// kube-scheduler's extender requests as `gpuorch extender` serves them: each input line is either
// a watch object for the extender's cache (`node JSON`, `node- JSON` for a deletion, `pod JSON`,
// `pod- JSON`), `synced` (both informers listed), or a request `VERB BODY` handed to
// ExtenderService::call exactly as the HTTP server hands it over (filter, prioritize, bind, or
// any other word). The promise checked: whatever the bytes, the answer is 200, 400 or 404 with a
// body (a 500 means a request the core could not use escaped as an exception: a bug to find), and
// a 200 answer is JSON. The API server is unreachable (port 1), so a bind that gets that far is
// refused in its Error field, as when the API server is down.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "gpuorch/k8s/api/api_client.hpp"
#include "gpuorch/k8s/api/server_json.hpp"
#include "gpuorch/k8s/extender/extender_service.hpp"

namespace {

using gpuorch::k8s::ExtenderService;
using Json = nlohmann::json;

gpuorch::k8s::ApiClient& unreachable_api() {
  static gpuorch::k8s::ApiClient api(gpuorch::k8s::ClusterConfig{.server = "https://127.0.0.1:1"});
  return api;
}

void observe(ExtenderService& service, std::string_view body, bool node, bool deleted) {
  Json obj;
  try {
    obj = gpuorch::k8s::parse_server_json(body, "fuzz object");
  } catch (const std::runtime_error&) {
    return;  // the informer drops what it cannot parse before the service sees it
  }
  if (!obj.is_object()) return;
  node ? service.on_node(obj, deleted) : service.on_pod(obj, deleted);
}

void run_line(ExtenderService& service, std::string_view line) {
  const auto space = line.find(' ');
  const std::string_view word = line.substr(0, space);
  const std::string_view body = space == std::string_view::npos ? "" : line.substr(space + 1);
  if (word == "synced") {
    service.mark_synced();
  } else if (word == "node" || word == "node-") {
    observe(service, body, true, word.back() == '-');
  } else if (word == "pod" || word == "pod-") {
    observe(service, body, false, word.back() == '-');
  } else {
    const ExtenderService::Reply r = service.call(word, body);
    if (std::getenv("GPUORCH_FUZZ_VERBOSE") != nullptr) {  // to read a saved crash's answers
      std::fprintf(stderr, "%.*s -> %d %s\n", static_cast<int>(word.size()), word.data(), r.status,
                   r.body.c_str());
    }
    if (r.status == 500 || r.body.empty()) std::abort();
    if (r.status == 200 && !Json::accept(r.body)) std::abort();
    if (r.status != 200 && r.status != 400 && r.status != 404) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ExtenderService service(unreachable_api(), gpuorch::k8s::ExtenderOptions{});
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    run_line(service, rest.substr(0, nl));
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  return 0;
}

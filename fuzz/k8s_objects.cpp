// Kubernetes objects as the scheduler reads them from the API server: each input line is a watch
// event ({"type", "object"}), a list ({"items": [...]}) or one object, parsed as the watch does
// (parse_server_json) and read as a Node and as a Pod. Only the parse may refuse (runtime_error);
// reading an object never throws (but object_key without a name): a node it cannot use is a reason, a pod gets `error`.
#include <stdexcept>
#include <string_view>

#include "fuzz_support.hpp"
#include "gpuorch/k8s/api/informer.hpp"
#include "gpuorch/k8s/api/server_json.hpp"
#include "gpuorch/k8s/mirror/node_object.hpp"
#include "gpuorch/k8s/mirror/pod_object.hpp"

namespace {

using Json = nlohmann::json;

void read_object(const Json& obj) {
  if (!obj.is_object()) return;
  try {
    gpuorch::k8s::object_key(obj);  // refuses an object without a name, as the informer expects
  } catch (const std::runtime_error&) {
  }
  gpuorch::k8s::node_from_json(obj);
  gpuorch::k8s::pod_from_json(obj);
}

void read_line(std::string_view line) {
  Json j;
  try {
    j = gpuorch::k8s::parse_server_json(line, "watch fuzz");
  } catch (const std::runtime_error&) {
    return;
  }
  if (!j.is_object()) return;
  if (const auto it = j.find("object"); it != j.end()) read_object(*it);
  if (const auto it = j.find("items"); it != j.end() && it->is_array()) {
    for (const auto& item : *it) read_object(item);
  }
  read_object(j);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    read_line(rest.substr(0, nl));
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  return 0;
}

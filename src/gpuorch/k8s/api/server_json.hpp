#pragma once
// JSON from the API server, parsed defensively: the server is on the other side of a network, so a
// broken or hostile answer must end in an exception with a clear message, never in a crash.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace gpuorch::k8s {

// Nesting deeper than this is refused before parsing: nlohmann's parser and the copies and dumps
// of its values recurse once per level, so a megabyte of '[' would overflow the stack. Kubernetes
// objects, CRD schemas included, stay far below it.
inline constexpr int kMaxJsonDepth = 512;

// Throws std::runtime_error "<what>: the server sent invalid JSON (...)".
nlohmann::json parse_server_json(std::string_view text, const std::string& what);

}  // namespace gpuorch::k8s

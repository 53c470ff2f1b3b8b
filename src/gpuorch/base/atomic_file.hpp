#pragma once
// Outputs are never half-written: content goes to a temporary sibling and is renamed into place.
#include <string>
#include <string_view>

namespace gpuorch::base {

void write_file_atomically(const std::string& path, std::string_view content);

}  // namespace gpuorch::base

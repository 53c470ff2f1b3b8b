#pragma once
// Outputs are never half-written: content goes to a temporary sibling and is renamed into place.
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace gpuorch::base {

void write_file_atomically(const std::string& path, std::string_view content);

// A folder the same way: `write_into` fills a sibling PATH.tmp.PID, which then takes the place of
// PATH (an old PATH is removed only once the new one is complete). When `write_into` throws, the
// sibling is removed and PATH is left as it was.
void write_folder_atomically(const std::string& path,
                             const std::function<void(const std::filesystem::path&)>& write_into);

// Before any work: can `path` be written the way write_file_atomically (a file) or a staged
// folder (kFolder: written as a sibling PATH.tmp.PID, then renamed into place) writes it? Creates
// and removes that sibling. Throws InputError "FLAG PATH: why" (a folder where a file goes or the
// reverse, a parent that does not exist, a place that cannot be written), so a run that would
// fail at the end fails at the start instead, having written nothing.
enum class OutputKind { kFile, kFolder };
void check_output(const std::string& flag, const std::string& path,
                  OutputKind kind = OutputKind::kFile);

}  // namespace gpuorch::base

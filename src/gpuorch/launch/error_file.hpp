#pragma once
// The error files workers write through torch.distributed.elastic's @record
// (TORCHELASTIC_ERROR_FILE): {"message": {"message": "...", "extraInfo": {"py_callstack": "...",
// "timestamp": "<unix seconds>"}}}. The root cause is the file with the smallest timestamp.
#include <cstdint>
#include <optional>
#include <string>

namespace gpuorch::launch {

struct WorkerError {
  std::string message;    // first line of the message ("RuntimeError: boom")
  std::string traceback;  // py_callstack, may be empty
  std::int64_t timestamp = 0;
};

// nullopt when the file is absent or not torch's format.
std::optional<WorkerError> read_error_file(const std::string& path);

}  // namespace gpuorch::launch

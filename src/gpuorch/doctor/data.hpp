#pragma once
// `gpuorch doctor data PATH`: how fast a dataset can be read (several threads, direct I/O so the
// page cache does not flatter it) against what the GPUs would consume.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuorch/doctor/finding.hpp"

namespace gpuorch::doctor {

struct DataReadOptions {
  std::string path;  // a file, or a directory read recursively
  int threads = 8;
  double seconds = 10;                                // stop reading after this long ...
  std::uint64_t max_bytes = std::uint64_t{16} << 30;  // ... or this many bytes
  bool direct = true;                                 // O_DIRECT where the filesystem allows it
};

struct DataReadResult {
  std::uint64_t bytes = 0;
  double seconds = 0;
  int threads = 0;
  std::size_t files = 0, files_read = 0;  // regular files found; of them, read (in part or whole)
  std::uint64_t dataset_bytes = 0;        // their total size
  bool direct_asked = false;
  std::size_t direct_refused = 0;   // files read through the page cache: O_DIRECT refused
  std::vector<std::string> errors;  // the first few files that could not be read
  [[nodiscard]] double mb_per_second() const;  // MB = 10^6 bytes
};

// Throws base::InputError "PATH: what" when PATH does not exist, or holds no regular file.
DataReadResult measure_read(const DataReadOptions& o);

// What the GPUs consume: samples/s per GPU x bytes per sample x GPUs.
struct DataNeed {
  double samples_per_second = 0;
  std::uint64_t sample_bytes = 0;
  int gpus = 1;
  [[nodiscard]] double mb_per_second() const;
};

// data.ok (info) or data.too-slow (warning; error under half of the need) with the evidence;
// without a need, data.read (info) only. data.no-direct-io (info) when reads went through the
// page cache.
std::vector<Finding> check_data(const DataReadResult& r, const std::optional<DataNeed>& need);

}  // namespace gpuorch::doctor

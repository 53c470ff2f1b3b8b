#pragma once
// The JSON document nccl-tests writes with -J (src/util.cu, JSON_FILE_VERSION 2). Its schema is
// not documented; the keys, nesting and value types here are the ones its writer emits, including
// its quirks (booleans written as the strings "true"/"false", root as a 6-wide string).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpuorch/comm/bench.hpp"

namespace gpuorch::comm {

struct JsonRun {
  std::vector<std::string> args;     // the command line, argv[0] first
  std::vector<std::string> env;      // "NAME=value", as nccl-tests records the environment
  std::string start_time, end_time;  // local time, "%Y-%m-%d %H:%M:%S"
  double min_bw = -1;                // NCCL_TESTS_MIN_BW, -1 when unset
};

// One device line of RunInfo ("Pid  12345 on host device  0 [0000:18:00] NVIDIA H200") as
// nccl-tests' devices entry for rank `rank`.
nlohmann::ordered_json device_json(int rank, const std::string& line);
nlohmann::ordered_json nccl_tests_json(const Options& o, const RunInfo& info,
                                       const std::vector<Row>& rows, const JsonRun& run);

}  // namespace gpuorch::comm

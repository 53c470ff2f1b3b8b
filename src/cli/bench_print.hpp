#pragma once
// Prints one `gpuorch bench` run as nccl-tests does (header and column titles when the run starts,
// each row as it is measured, the closing footer) or as one JSON document; only the reporting
// process prints. The GPU and host backends share it, so their output cannot drift apart.
// -J FILE: nccl-tests' JSON document too, claimed before the run as nccl-tests does (an existing
// FILE is kept and FILE.0, FILE.1, ... tried instead).
#include <cstdio>
#include <string>
#include <vector>

#include "gpuorch/comm/bench.hpp"
#include "gpuorch/comm/nccl_tests_json.hpp"

namespace gpuorch::cli {

// NCCL_TESTS_MIN_BW (GB/s), -1 when unset; throws base::InputError when it is no number.
double min_bw_from_env();

class BenchPrinter {
 public:
  BenchPrinter(const comm::Options& o, bool reporting, const std::string& json_file = "");
  ~BenchPrinter();
  BenchPrinter(const BenchPrinter&) = delete;
  BenchPrinter& operator=(const BenchPrinter&) = delete;

  void start(const comm::RunInfo& i);
  void row(const comm::Row& r) const;
  // Footer or JSON; exit code 1 when any check counted a wrong value or the average bus bandwidth
  // is below 0.9 x NCCL_TESTS_MIN_BW, as nccl-tests.
  int finish(const std::vector<comm::Row>& rows);

 private:
  const comm::Options& o_;
  bool out_;
  comm::RunInfo info_;
  comm::JsonRun run_;
  std::FILE* json_ = nullptr;
};

}  // namespace gpuorch::cli

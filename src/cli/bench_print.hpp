#pragma once
// Prints one `gpuorch bench` run as nccl-tests does (header and column titles when the run starts,
// each row as it is measured, the closing footer) or as one JSON document; only the reporting
// process prints. The GPU and host backends share it, so their output cannot drift apart.
#include <fmt/format.h>

#include <cstdio>
#include <vector>

#include "gpuorch/comm/bench.hpp"

namespace gpuorch::cli {

class BenchPrinter {
 public:
  BenchPrinter(const comm::Options& o, bool reporting) : o_(o), out_(reporting) {}

  void start(const comm::RunInfo& i) {
    info_ = i;
    if (out_ && !o_.json) fmt::print("{}{}", comm::header(o_, i), comm::table_header());
    std::fflush(stdout);
  }
  void row(const comm::Row& r) const {
    if (out_ && !o_.json) fmt::print("{}", comm::format_row(o_, r));
    std::fflush(stdout);
  }
  // Footer or JSON; exit code 1 when any check counted a wrong value, as nccl-tests.
  int finish(const std::vector<comm::Row>& rows) const {
    if (out_ && o_.json) {
      fmt::print("{}\n", comm::to_json(o_, info_, rows).dump(2));
    } else if (out_) {
      fmt::print("{}", comm::footer(o_, rows));
    }
    for (const auto& r : rows) {
      if (r.out_of_place.wrong > 0 || (r.in_place && r.in_place->wrong > 0)) return 1;
    }
    return 0;
  }

 private:
  const comm::Options& o_;
  bool out_;
  comm::RunInfo info_;
};

}  // namespace gpuorch::cli

#pragma once
// The host backend of `gpuorch bench` (--backend host): the same collectives, table and check as
// the GPU backend, between processes over TCP with Gloo (libgloo). This process is one rank.
#include <cstddef>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuorch/comm/bench.hpp"
#include "gpuorch/comm/host_rendezvous.hpp"

namespace gpuorch::comm::host {

// A peer failed, timed out or could not be reached: exit code 1.
class PeerError : public std::runtime_error {
 public:
  explicit PeerError(const std::string& message) : std::runtime_error(message) {}
};

// Test hooks (tests/comm/host_backend_test.cpp): a wrong value planted in one rank's output, and a
// rank that dies (SIGKILL) or hangs (SIGSTOP) at its n-th operation.
struct Faults {
  std::optional<int> corrupt_rank;
  std::size_t corrupt_index = 0;
  enum class Kind { none, kill, stall } kind = Kind::none;
  int fault_rank = 0;
  long long fault_op = 0;
};
// GPUORCH_BENCH_CORRUPT=rank:index and GPUORCH_BENCH_FAULT=kill|stall:rank:op; InputError if bad.
Faults faults_from_env();

// Runs the sweep as rank e.rank; every rank gets the same rows (times averaged over ranks as
// nccl-tests' default -a 1, #wrong summed). on_start gets one line per rank.
std::vector<Row> run_host(const Options& o, const Endpoint& e, const Faults& f,
                          const std::function<void(const RunInfo&)>& on_start,
                          const std::function<void(const Row&)>& on_row);

}  // namespace gpuorch::comm::host

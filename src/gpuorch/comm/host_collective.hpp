#pragma once
// One rank's buffers and Gloo calls for the collective being measured. Which Gloo algorithm each
// collective uses is listed in docs/comm.md ("Host backend").
#include <cstddef>
#include <memory>

#include "gpuorch/comm/bench.hpp"

namespace gloo {
class Context;
}

namespace gpuorch::comm::host {

class CollectiveRunner {
 public:
  // Buffers sized for the largest per-rank count of the sweep.
  CollectiveRunner(const Options& o, std::shared_ptr<gloo::Context> context, std::size_t max_count);
  ~CollectiveRunner();
  CollectiveRunner(const CollectiveRunner&) = delete;
  CollectiveRunner& operator=(const CollectiveRunner&) = delete;

  // Sets up one size (Gloo's reduce-scatter binds its buffers when it is built).
  void prepare(std::size_t count);
  // One operation of the prepared size; throws gloo::Exception when a peer fails or times out.
  void run(bool in_place);
  // Where this rank's input lies and where its output appears (element counts: ElementCounts).
  void* input(bool in_place);
  void* output(bool in_place);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuorch::comm::host

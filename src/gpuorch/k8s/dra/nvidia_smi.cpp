#include "gpuorch/k8s/dra/nvidia_smi.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

#include "gpuorch/base/child_process.hpp"
#include "gpuorch/base/printable.hpp"

namespace gpuorch::k8s::dra {
namespace {

void run(const NvidiaSmi& smi, const std::vector<std::string>& args, const std::string& what) {
  if (smi.path.empty()) {
    throw std::runtime_error(
        fmt::format("{}: nvidia-smi was not found on PATH (--nvidia-smi names it)", what));
  }
  std::vector<std::string> argv{smi.path};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto r = base::run_child(argv, {}, {}, smi.timeout);
  if (r.timed_out) {
    throw std::runtime_error(fmt::format("{}: {} gave no answer within {} s", what, smi.path,
                                         smi.timeout.count() / 1000));
  }
  if (r.code != 0) {
    const std::string said = r.out + r.err;
    throw std::runtime_error(fmt::format("{}: {} exited with {}: {}", what, smi.path, r.code,
                                         base::quoted_printable(said, 300)));
  }
}

}  // namespace

void set_compute_mode(const NvidiaSmi& smi, const std::string& uuid, const std::string& mode) {
  run(smi, {"-i", uuid, "-c", mode}, fmt::format("setting {}'s compute mode to {}", uuid, mode));
}

void set_time_slice(const NvidiaSmi& smi, const std::string& uuid, int interval) {
  run(smi, {"compute-policy", "-i", uuid, "--set-timeslice", std::to_string(interval)},
      fmt::format("setting {}'s time slice to {}", uuid, interval));
}

}  // namespace gpuorch::k8s::dra

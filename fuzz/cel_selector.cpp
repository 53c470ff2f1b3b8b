// DRA device selectors (k8s/mirror/cel_subset.hpp): any text is parsed and, when it parses,
// evaluated against a GPU device of the recorded DGX H100's kind; the only failure is
// SelectorError (outside the subset, malformed, or a runtime error), never a crash, a hang or
// another exception.
#include "fuzz_support.hpp"
#include "gpuorch/k8s/mirror/cel_subset.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuorch::k8s;
  const std::string text = gpuorch::fuzz::text_of(data, size);
  SelectorDevice d;
  d.driver = "gpu.gpuorch.io";
  d.attributes["gpu.gpuorch.io/type"] = std::string("gpu");
  d.attributes["gpu.gpuorch.io/index"] = std::int64_t{3};
  d.attributes["gpu.gpuorch.io/mig"] = false;
  d.attributes["gpu.gpuorch.io/driverVersion"] = SemVer{550, 54, 15};
  d.capacity_milli["gpu.gpuorch.io/memory"] = 81559LL * 1024 * 1024 * 1000;
  try {
    (void)DeviceSelector::parse(text).matches(d);
  } catch (const SelectorError&) {
  }
  return 0;
}

// `gpuorch topo --json` read back (the device plugin's and launch's --topology FILE).
#include "fuzz_support.hpp"
#include "gpuorch/topology/json_read.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = gpuorch::fuzz::text_of(data, size);
  gpuorch::fuzz::input_errors_only([&] { gpuorch::topology::host_from_json_text(text, "t.json"); });
  return 0;
}

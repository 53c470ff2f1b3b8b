// The device plugin's configuration file (NVIDIA's k8s-device-plugin format, YAML or JSON).
#include "fuzz_support.hpp"
#include "gpuorch/k8s/deviceplugin/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = gpuorch::fuzz::text_of(data, size);
  gpuorch::fuzz::input_errors_only([&] { gpuorch::k8s::parse_config(text, "config.yaml"); });
  return 0;
}

// The YAML inventory (docs/inputs.md), with limits small enough that every accepted input
// expands quickly (the default limits are tested in tests/io/inventory_test.cpp).
#include "fuzz_support.hpp"
#include "gpuorch/io/inventory.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = gpuorch::fuzz::text_of(data, size);
  const gpuorch::io::InventoryLimits limits{10'000, 100'000, 64 << 20};
  gpuorch::fuzz::input_errors_only([&] { gpuorch::io::parse_inventory(text, "inv.yaml", limits); });
  return 0;
}

// openb pod CSV (5 or 11 columns) through the CSV reader and the pod checks.
#include "fuzz_support.hpp"
#include "gpuorch/base/csv.hpp"
#include "gpuorch/io/openb.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = gpuorch::fuzz::text_of(data, size);
  gpuorch::fuzz::input_errors_only(
      [&] { gpuorch::io::openb_pods(gpuorch::base::parse_csv(text, "pods.csv")); });
  return 0;
}

// PyTorch's pickled c10d rendezvous state as the launcher reads it from a store any peer may
// write: only PickleError may come out, and what was read is written back and read again equal.
#include "gpuorch/launch/torch_rdzv_state.hpp"

#include <cstdlib>

#include "fuzz_support.hpp"
#include "gpuorch/launch/py_pickle.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuorch::launch;
  const std::string bytes = gpuorch::fuzz::text_of(data, size);
  TorchRdzvState state;
  try {
    state = decode_torch_state(bytes, torch2_dialect());
  } catch (const pickle::PickleError&) {
    return 0;
  }
  const auto again = decode_torch_state(encode_torch_state(state), torch2_dialect());
  if (again.participants != state.participants || again.last_heartbeats != state.last_heartbeats ||
      again.round != state.round || again.deadline != state.deadline) {
    std::abort();
  }
  return 0;
}

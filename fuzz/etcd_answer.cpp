// etcd gateway answers as the launcher's rendezvous reads them: every decoder on the same bytes,
// and the watch stream split at every line. Only EtcdError may come out.
#include "fuzz_support.hpp"
#include "gpuorch/launch/etcd_answer.hpp"

namespace {

template <typename F>
void etcd_errors_only(F&& decode) {
  try {
    decode();
  } catch (const gpuorch::launch::EtcdError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuorch::launch;
  const std::string answer = gpuorch::fuzz::text_of(data, size);
  const std::string where = "etcd at fuzz:2379/v3";
  etcd_errors_only([&] { range_first(where, answer); });
  std::int64_t revision = 0;
  etcd_errors_only([&] { range_all(where, answer, &revision); });
  etcd_errors_only([&] { txn_succeeded(where, answer); });
  etcd_errors_only([&] { granted_lease(where, answer); });
  etcd_errors_only([&] { lease_alive(where, answer); });
  // The stream arrives in pieces: cut it in two where the first byte says.
  std::string buffer;
  const std::size_t cut = size == 0 ? 0 : data[0] % (size + 1);
  buffer.append(answer, 0, cut);
  if (!watch_saw_change(buffer)) {
    buffer.append(answer, cut);
    watch_saw_change(buffer);
  }
  return 0;
}

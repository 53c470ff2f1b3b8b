#include "gpuorch/comm/gpu_libs.hpp"

#include <fmt/format.h>

namespace gpuorch::comm::gpu {
namespace {

template <typename F>
void bind(const base::SharedLibrary& lib, const char* lib_name, F& f, const char* symbol) {
  if (!lib.bind(f, {symbol})) throw EnvironmentError(fmt::format("{} lacks {}", lib_name, symbol));
}

}  // namespace

Cuda::Cuda() {
  if (!lib.loaded()) {
    // dlerror() already starts with the library's name.
    throw EnvironmentError(
        fmt::format("no CUDA driver ({}): gpuorch bench needs an NVIDIA GPU host", lib.error()));
  }
  const char* n = "libcuda.so.1";
  // Versioned names as cuda.h's #defines map them (cuMemAlloc -> cuMemAlloc_v2, ...).
  bind(lib, n, init, "cuInit");
  bind(lib, n, get_error_string, "cuGetErrorString");
  bind(lib, n, driver_version, "cuDriverGetVersion");
  bind(lib, n, device_count, "cuDeviceGetCount");
  bind(lib, n, device_get, "cuDeviceGet");
  bind(lib, n, device_name, "cuDeviceGetName");
  bind(lib, n, device_attribute, "cuDeviceGetAttribute");
  bind(lib, n, primary_retain, "cuDevicePrimaryCtxRetain");
  bind(lib, n, primary_release, "cuDevicePrimaryCtxRelease_v2");
  bind(lib, n, ctx_set_current, "cuCtxSetCurrent");
  bind(lib, n, ctx_synchronize, "cuCtxSynchronize");
  bind(lib, n, mem_alloc, "cuMemAlloc_v2");
  bind(lib, n, mem_free, "cuMemFree_v2");
  bind(lib, n, host_alloc, "cuMemHostAlloc");
  bind(lib, n, host_free, "cuMemFreeHost");
  bind(lib, n, htod, "cuMemcpyHtoD_v2");
  bind(lib, n, dtoh, "cuMemcpyDtoH_v2");
  bind(lib, n, dtod, "cuMemcpyDtoD_v2");
  bind(lib, n, memset_d8, "cuMemsetD8_v2");
  bind(lib, n, stream_create, "cuStreamCreate");
  bind(lib, n, stream_destroy, "cuStreamDestroy_v2");
  bind(lib, n, stream_sync, "cuStreamSynchronize");
}

void Cuda::check(CuResult r, const char* what) const {
  if (r == 0) return;
  const char* s = nullptr;
  get_error_string(r, &s);
  throw EnvironmentError(fmt::format("CUDA {}: {} ({})", what, s ? s : "unknown error", r));
}

Nccl::Nccl(const std::string& name) : lib(name) {
  if (!lib.loaded()) {
    throw EnvironmentError(fmt::format(
        "no NCCL ({}): install NCCL or pass --nccl-library /path/to/libnccl.so.2", lib.error()));
  }
  const char* n = "libnccl.so.2";
  bind(lib, n, get_version, "ncclGetVersion");
  bind(lib, n, error_string, "ncclGetErrorString");
  bind(lib, n, get_unique_id, "ncclGetUniqueId");
  bind(lib, n, comm_init_rank, "ncclCommInitRank");
  bind(lib, n, comm_init_all, "ncclCommInitAll");
  bind(lib, n, comm_destroy, "ncclCommDestroy");
  bind(lib, n, comm_abort, "ncclCommAbort");
  bind(lib, n, group_start, "ncclGroupStart");
  bind(lib, n, group_end, "ncclGroupEnd");
  bind(lib, n, all_reduce, "ncclAllReduce");
  bind(lib, n, all_gather, "ncclAllGather");
  bind(lib, n, reduce_scatter, "ncclReduceScatter");
  bind(lib, n, broadcast, "ncclBroadcast");
  bind(lib, n, reduce, "ncclReduce");
  bind(lib, n, send, "ncclSend");
  bind(lib, n, recv, "ncclRecv");
}

void Nccl::check(NcclResult r, const char* what) const {
  if (r != 0) throw EnvironmentError(fmt::format("NCCL {}: {} ({})", what, error_string(r), r));
}

int Nccl::version_code() const {
  int v = 0;
  check(get_version(&v), "version");
  return v;
}

std::string Nccl::version() const {
  const int v = version_code();
  // NCCL_VERSION_CODE since 2.9: major * 10000 + minor * 100 + patch (2.28.9 = 22809).
  return fmt::format("NCCL {}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

}  // namespace gpuorch::comm::gpu

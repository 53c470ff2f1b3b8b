#pragma once
// NCCL (libnccl.so.2) and the CUDA driver API (libcuda.so.1) through dlopen. Only the entry points
// gpuorch uses are declared, with the signatures, symbol names and enum values of the public
// headers (checked against CUDA 13.0's cuda.h and NCCL 2.28.9's nccl.h); nothing NVIDIA ships is
// needed to build.
#include <cstddef>
#include <string>

#include "gpuorch/base/shared_library.hpp"
#include "gpuorch/comm/gpu_backend.hpp"

namespace gpuorch::comm::gpu {

using CuResult = int;                       // CUresult (CUDA_SUCCESS = 0)
using CuDevice = int;                       // CUdevice
using CuContext = struct CuContextOpaque*;  // CUcontext
using CuStream = struct CuStreamOpaque*;    // CUstream
using CuDevicePtr = unsigned long long;     // CUdeviceptr (CUdeviceptr_v2, 64-bit)
using NcclResult = int;                     // ncclResult_t (ncclSuccess = 0)
using NcclComm = struct NcclCommOpaque*;    // ncclComm_t
// ncclUniqueId: passed by value to ncclCommInitRank, so the layout must be the header's.
struct NcclUniqueId {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};
// CUdevice_attribute values
constexpr int kCuDevAttrPciBus = 33, kCuDevAttrPciDevice = 34, kCuDevAttrPciDomain = 50;
constexpr unsigned kCuStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING

struct Cuda {
  base::SharedLibrary lib{"libcuda.so.1"};
  CuResult (*init)(unsigned) = nullptr;
  CuResult (*get_error_string)(CuResult, const char**) = nullptr;
  CuResult (*driver_version)(int*) = nullptr;
  CuResult (*device_count)(int*) = nullptr;
  CuResult (*device_get)(CuDevice*, int) = nullptr;
  CuResult (*device_name)(char*, int, CuDevice) = nullptr;
  CuResult (*device_attribute)(int*, int, CuDevice) = nullptr;
  CuResult (*primary_retain)(CuContext*, CuDevice) = nullptr;
  CuResult (*primary_release)(CuDevice) = nullptr;
  CuResult (*ctx_set_current)(CuContext) = nullptr;
  CuResult (*ctx_synchronize)() = nullptr;
  CuResult (*mem_alloc)(CuDevicePtr*, std::size_t) = nullptr;
  CuResult (*mem_free)(CuDevicePtr) = nullptr;
  CuResult (*host_alloc)(void**, std::size_t, unsigned) = nullptr;
  CuResult (*host_free)(void*) = nullptr;
  CuResult (*htod)(CuDevicePtr, const void*, std::size_t) = nullptr;
  CuResult (*dtoh)(void*, CuDevicePtr, std::size_t) = nullptr;
  CuResult (*dtod)(CuDevicePtr, CuDevicePtr, std::size_t) = nullptr;
  CuResult (*memset_d8)(CuDevicePtr, unsigned char, std::size_t) = nullptr;
  CuResult (*stream_create)(CuStream*, unsigned) = nullptr;
  CuResult (*stream_destroy)(CuStream) = nullptr;
  CuResult (*stream_sync)(CuStream) = nullptr;

  Cuda();  // throws EnvironmentError when there is no driver
  void check(CuResult r, const char* what) const;
};

struct Nccl {
  base::SharedLibrary lib;
  NcclResult (*get_version)(int*) = nullptr;
  const char* (*error_string)(NcclResult) = nullptr;
  NcclResult (*get_unique_id)(NcclUniqueId*) = nullptr;
  NcclResult (*comm_init_rank)(NcclComm*, int, NcclUniqueId, int) = nullptr;
  NcclResult (*comm_init_all)(NcclComm*, int, const int*) = nullptr;
  NcclResult (*comm_destroy)(NcclComm) = nullptr;
  NcclResult (*comm_abort)(NcclComm) = nullptr;
  NcclResult (*group_start)() = nullptr;
  NcclResult (*group_end)() = nullptr;
  NcclResult (*all_reduce)(const void*, void*, std::size_t, int, int, NcclComm, CuStream) = nullptr;
  NcclResult (*all_gather)(const void*, void*, std::size_t, int, NcclComm, CuStream) = nullptr;
  NcclResult (*reduce_scatter)(const void*, void*, std::size_t, int, int, NcclComm,
                               CuStream) = nullptr;
  NcclResult (*broadcast)(const void*, void*, std::size_t, int, int, NcclComm, CuStream) = nullptr;
  NcclResult (*reduce)(const void*, void*, std::size_t, int, int, int, NcclComm,
                       CuStream) = nullptr;
  NcclResult (*send)(const void*, std::size_t, int, int, NcclComm, CuStream) = nullptr;
  NcclResult (*recv)(void*, std::size_t, int, int, NcclComm, CuStream) = nullptr;

  explicit Nccl(const std::string& name);  // throws EnvironmentError when it does not load
  void check(NcclResult r, const char* what) const;
  std::string version() const;  // "NCCL 2.28.9"
  int version_code() const;     // ncclGetVersion: 22809
};

}  // namespace gpuorch::comm::gpu

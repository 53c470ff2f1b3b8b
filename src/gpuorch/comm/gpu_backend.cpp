// NCCL and the CUDA driver API through dlopen. Only the entry points used here are declared, with
// the signatures and values of the public headers (nccl.h, cuda.h); nothing NVIDIA ships is needed
// to build.
#include "gpuorch/comm/gpu_backend.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

namespace gpuorch::comm {
namespace {

using CuResult = int;                       // CUresult
using CuDevice = int;                       // CUdevice
using CuContext = struct CuContextOpaque*;  // CUcontext
using CuStream = struct CuStreamOpaque*;    // CUstream
using CuDevicePtr = unsigned long long;     // CUdeviceptr (64-bit)
using NcclResult = int;                     // ncclResult_t
using NcclComm = struct NcclCommOpaque*;    // ncclComm_t
constexpr int kCuDevAttrPciBus = 33, kCuDevAttrPciDevice = 34, kCuDevAttrPciDomain = 50;

struct Library {
  void* handle = nullptr;
  std::string error;  // dlerror() when dlopen failed: why the library did not load
  explicit Library(const char* name) : handle(dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
    if (handle == nullptr) {
      const char* e = dlerror();
      error = e != nullptr ? e : "unknown error";
    }
  }
  ~Library() {
    if (handle) dlclose(handle);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
};

template <typename F>
void bind(const Library& lib, const char* lib_name, F& f, const char* symbol) {
  void* p = dlsym(lib.handle, symbol);
  if (!p) throw EnvironmentError(fmt::format("{} lacks {}", lib_name, symbol));
  f = reinterpret_cast<F>(p);
}

struct Cuda {
  Library lib{"libcuda.so.1"};
  CuResult (*init)(unsigned) = nullptr;
  CuResult (*get_error_string)(CuResult, const char**) = nullptr;
  CuResult (*device_count)(int*) = nullptr;
  CuResult (*device_get)(CuDevice*, int) = nullptr;
  CuResult (*device_name)(char*, int, CuDevice) = nullptr;
  CuResult (*device_attribute)(int*, int, CuDevice) = nullptr;
  CuResult (*primary_retain)(CuContext*, CuDevice) = nullptr;
  CuResult (*primary_release)(CuDevice) = nullptr;
  CuResult (*ctx_set_current)(CuContext) = nullptr;
  CuResult (*mem_alloc)(CuDevicePtr*, std::size_t) = nullptr;
  CuResult (*mem_free)(CuDevicePtr) = nullptr;
  CuResult (*htod)(CuDevicePtr, const void*, std::size_t) = nullptr;
  CuResult (*dtoh)(void*, CuDevicePtr, std::size_t) = nullptr;
  CuResult (*stream_create)(CuStream*, unsigned) = nullptr;
  CuResult (*stream_destroy)(CuStream) = nullptr;
  CuResult (*stream_sync)(CuStream) = nullptr;

  Cuda() {
    if (!lib.handle) {
      throw EnvironmentError(fmt::format(
          "no CUDA driver (libcuda.so.1: {}): gpuorch bench needs an NVIDIA GPU host", lib.error));
    }
    const char* n = "libcuda.so.1";
    bind(lib, n, init, "cuInit");
    bind(lib, n, get_error_string, "cuGetErrorString");
    bind(lib, n, device_count, "cuDeviceGetCount");
    bind(lib, n, device_get, "cuDeviceGet");
    bind(lib, n, device_name, "cuDeviceGetName");
    bind(lib, n, device_attribute, "cuDeviceGetAttribute");
    bind(lib, n, primary_retain, "cuDevicePrimaryCtxRetain");
    bind(lib, n, primary_release, "cuDevicePrimaryCtxRelease_v2");
    bind(lib, n, ctx_set_current, "cuCtxSetCurrent");
    bind(lib, n, mem_alloc, "cuMemAlloc_v2");
    bind(lib, n, mem_free, "cuMemFree_v2");
    bind(lib, n, htod, "cuMemcpyHtoD_v2");
    bind(lib, n, dtoh, "cuMemcpyDtoH_v2");
    bind(lib, n, stream_create, "cuStreamCreate");
    bind(lib, n, stream_destroy, "cuStreamDestroy_v2");
    bind(lib, n, stream_sync, "cuStreamSynchronize");
  }
  void check(CuResult r, const char* what) const {
    if (r == 0) return;
    const char* s = nullptr;
    get_error_string(r, &s);
    throw EnvironmentError(fmt::format("CUDA {}: {} ({})", what, s ? s : "unknown error", r));
  }
};

struct Nccl {
  Library lib;
  NcclResult (*get_version)(int*) = nullptr;
  const char* (*error_string)(NcclResult) = nullptr;
  NcclResult (*comm_init_all)(NcclComm*, int, const int*) = nullptr;
  NcclResult (*comm_destroy)(NcclComm) = nullptr;
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

  explicit Nccl(const std::string& name) : lib(name.c_str()) {
    if (!lib.handle) {
      throw EnvironmentError(
          fmt::format("no NCCL ({}: {}): install NCCL or pass --nccl-library /path/to/libnccl.so.2",
                      name, lib.error));
    }
    const char* n = "libnccl.so.2";
    bind(lib, n, get_version, "ncclGetVersion");
    bind(lib, n, error_string, "ncclGetErrorString");
    bind(lib, n, comm_init_all, "ncclCommInitAll");
    bind(lib, n, comm_destroy, "ncclCommDestroy");
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
  void check(NcclResult r, const char* what) const {
    if (r != 0) throw EnvironmentError(fmt::format("NCCL {}: {} ({})", what, error_string(r), r));
  }
};

struct Rank {
  CuDevice device = 0;
  CuContext context = nullptr;
  CuStream stream = nullptr;
  NcclComm comm = nullptr;
  CuDevicePtr send = 0, recv = 0;
  std::size_t send_bytes = 0, recv_bytes = 0;
};

// Owns the devices' streams, buffers and communicators; releases them in any case.
class Session {
 public:
  Session(const Cuda& cuda, const Nccl& nccl, int n)
      : cuda_(cuda), nccl_(nccl), ranks_(static_cast<std::size_t>(n)) {}
  ~Session() {
    for (auto& r : ranks_) {
      if (r.comm) nccl_.comm_destroy(r.comm);
    }
    for (auto& r : ranks_) {
      if (!r.context) continue;
      cuda_.ctx_set_current(r.context);
      if (r.send) cuda_.mem_free(r.send);
      if (r.recv) cuda_.mem_free(r.recv);
      if (r.stream) cuda_.stream_destroy(r.stream);
      cuda_.primary_release(r.device);
    }
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  std::vector<Rank>& ranks() { return ranks_; }

 private:
  const Cuda& cuda_;
  const Nccl& nccl_;
  std::vector<Rank> ranks_;
};

// Per-rank send/recv element counts for one size point.
struct Counts {
  std::size_t send = 0, recv = 0;
};
Counts counts(Collective c, std::size_t count, int n) {
  const auto un = static_cast<std::size_t>(n);
  switch (c) {
    case Collective::all_gather:
      return {count, count * un};
    case Collective::reduce_scatter:
      return {count * un, count};
    case Collective::alltoall:
      return {count * un, count * un};
    default:
      return {count, count};
  }
}

// Element conversion for the fill and the check.
void store(const DataType& t, unsigned char* p, double v) {
  switch (t.nccl) {
    case 0: {
      auto x = static_cast<std::int8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case 1: {
      auto x = static_cast<std::uint8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case 2: {
      auto x = static_cast<std::int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case 3: {
      auto x = static_cast<std::uint32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case 4: {
      auto x = static_cast<std::int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case 5: {
      auto x = static_cast<std::uint64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case 7: {
      auto x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    default: {
      std::memcpy(p, &v, 8);
      break;
    }
  }
}
double load(const DataType& t, const unsigned char* p) {
  switch (t.nccl) {
    case 0: {
      std::int8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case 1: {
      std::uint8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case 2: {
      std::int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case 3: {
      std::uint32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case 4: {
      std::int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case 5: {
      std::uint64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case 7: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    default: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
  }
}

class Runner {
 public:
  Runner(const Options& o, const Cuda& cuda, const Nccl& nccl, std::vector<Rank>& ranks)
      : o_(o), cuda_(cuda), nccl_(nccl), ranks_(ranks), n_(static_cast<int>(ranks.size())) {}

  // Launches the collective once on every rank inside one NCCL group.
  void launch(std::size_t count, bool in_place) {
    const Counts c = counts(o_.collective, count, n_);
    const std::size_t ws = o_.type.bytes;
    nccl_.check(nccl_.group_start(), "group start");
    for (int r = 0; r < n_; ++r) {
      Rank& k = ranks_[static_cast<std::size_t>(r)];
      auto* recv = reinterpret_cast<void*>(k.recv);
      const void* send = reinterpret_cast<const void*>(k.send);
      if (in_place) {
        send = recv;
        if (o_.collective == Collective::all_gather) {
          send = reinterpret_cast<const void*>(k.recv + static_cast<std::size_t>(r) * c.send * ws);
        }
        if (o_.collective == Collective::reduce_scatter) {
          // In place: the full array lives in send, the result in its own chunk of it.
          send = reinterpret_cast<const void*>(k.send);
          recv = reinterpret_cast<void*>(k.send + static_cast<std::size_t>(r) * c.recv * ws);
        }
      }
      const int dt = o_.type.nccl;
      NcclResult res = 0;
      switch (o_.collective) {
        case Collective::all_reduce:
          res = nccl_.all_reduce(send, recv, count, dt, o_.op.nccl, k.comm, k.stream);
          break;
        case Collective::all_gather:
          res = nccl_.all_gather(send, recv, count, dt, k.comm, k.stream);
          break;
        case Collective::reduce_scatter:
          res = nccl_.reduce_scatter(send, recv, count, dt, o_.op.nccl, k.comm, k.stream);
          break;
        case Collective::broadcast:
          res = nccl_.broadcast(send, recv, count, dt, o_.root, k.comm, k.stream);
          break;
        case Collective::reduce:
          res = nccl_.reduce(send, recv, count, dt, o_.op.nccl, o_.root, k.comm, k.stream);
          break;
        case Collective::alltoall:
          for (int p = 0; p < n_ && res == 0; ++p) {
            const auto off = static_cast<std::size_t>(p) * count * ws;
            res = nccl_.send(reinterpret_cast<const void*>(k.send + off), count, dt, p, k.comm,
                             k.stream);
            if (res == 0) {
              res =
                  nccl_.recv(reinterpret_cast<void*>(k.recv + off), count, dt, p, k.comm, k.stream);
            }
          }
          break;
        case Collective::sendrecv:
          res = nccl_.send(send, count, dt, (r + 1) % n_, k.comm, k.stream);
          if (res == 0) res = nccl_.recv(recv, count, dt, (r - 1 + n_) % n_, k.comm, k.stream);
          break;
      }
      if (res != 0) {
        nccl_.group_end();
        nccl_.check(res, "collective");
      }
    }
    nccl_.check(nccl_.group_end(), "group end");
  }

  void sync() {
    for (auto& k : ranks_) {
      cuda_.check(cuda_.ctx_set_current(k.context), "set context");
      cuda_.check(cuda_.stream_sync(k.stream), "stream synchronize");
    }
  }

  double time(std::size_t count, bool in_place) {
    for (int i = 0; i < o_.warmup; ++i) {
      launch(count, in_place);
      if (o_.blocking) sync();
    }
    sync();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) {
      launch(count, in_place);
      if (o_.blocking == 1 || o_.blocking == 2) sync();
    }
    sync();
    const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start;
    return d.count() / o_.iters;
  }

  // Fills the inputs with the deterministic pattern, runs once, counts wrong elements on the host.
  long long check(std::size_t count, bool in_place) {
    const Counts c = counts(o_.collective, count, n_);
    const std::size_t ws = o_.type.bytes;
    long long wrong = 0;
    for (int iter = 0; iter < o_.check; ++iter) {
      std::vector<unsigned char> host;
      for (int r = 0; r < n_; ++r) {
        Rank& k = ranks_[static_cast<std::size_t>(r)];
        cuda_.check(cuda_.ctx_set_current(k.context), "set context");
        // The input lives where launch() reads it: recv (in place) or send.
        std::size_t in_count = c.send;
        CuDevicePtr in = k.send;
        if (in_place && o_.collective != Collective::reduce_scatter) {
          in = k.recv;
          if (o_.collective == Collective::all_gather)
            in = k.recv + static_cast<std::size_t>(r) * c.send * ws;
        }
        host.assign(in_count * ws, 0);
        for (std::size_t i = 0; i < in_count; ++i) {
          store(o_.type, host.data() + i * ws, input_value(o_, r, i));
        }
        if (!host.empty()) cuda_.check(cuda_.htod(in, host.data(), host.size()), "copy to device");
        if (!in_place && k.recv_bytes > 0) {
          // Poison the output so a collective that writes nothing is caught.
          std::vector<unsigned char> poison(c.recv * ws, 0xA5);
          cuda_.check(cuda_.htod(k.recv, poison.data(), poison.size()), "copy to device");
        }
      }
      launch(count, in_place);
      sync();
      for (int r = 0; r < n_; ++r) {
        Rank& k = ranks_[static_cast<std::size_t>(r)];
        if ((o_.collective == Collective::reduce) && r != o_.root) continue;
        cuda_.check(cuda_.ctx_set_current(k.context), "set context");
        CuDevicePtr out = k.recv;
        if (in_place && o_.collective == Collective::reduce_scatter) {
          out = k.send + static_cast<std::size_t>(r) * c.recv * ws;
        }
        host.assign(c.recv * ws, 0);
        if (!host.empty()) cuda_.check(cuda_.dtoh(host.data(), out, host.size()), "copy to host");
        for (std::size_t i = 0; i < c.recv; ++i) {
          const double got = load(o_.type, host.data() + i * ws);
          if (got != expected(r, i, count)) ++wrong;
        }
      }
    }
    return wrong;
  }

 private:
  double expected(int r, std::size_t i, std::size_t count) const {
    switch (o_.collective) {
      case Collective::all_reduce:
      case Collective::reduce:
        return cast(reduced_value(o_, n_, i));
      case Collective::reduce_scatter:
        return cast(reduced_value(o_, n_, static_cast<std::size_t>(r) * count + i));
      case Collective::all_gather:
        return cast(input_value(o_, static_cast<int>(i / count), i % count));
      case Collective::broadcast:
        return cast(input_value(o_, o_.root, i));
      case Collective::alltoall:  // block p of rank r = block r of rank p
        return cast(input_value(o_, static_cast<int>(i / count),
                                static_cast<std::size_t>(r) * count + i % count));
      case Collective::sendrecv:
        return cast(input_value(o_, (r - 1 + n_) % n_, i));
    }
    return 0;
  }
  double cast(double v) const {
    unsigned char b[8];
    store(o_.type, b, v);
    return load(o_.type, b);
  }

  const Options& o_;
  const Cuda& cuda_;
  const Nccl& nccl_;
  std::vector<Rank>& ranks_;
  int n_;
};

}  // namespace

std::vector<Row> run_gpu(const Options& o, const std::function<void(const RunInfo&)>& on_start,
                         const std::function<void(const Row&)>& on_row) {
  const Cuda cuda;
  const Nccl nccl(o.nccl_library);
  cuda.check(cuda.init(0), "init");
  int present = 0;
  cuda.check(cuda.device_count(&present), "device count");
  if (o.gpus > present) {
    throw EnvironmentError(
        fmt::format("-g {}: only {} GPU{} present", o.gpus, present, present == 1 ? "" : "s"));
  }
  int version = 0;
  nccl.check(nccl.get_version(&version), "version");
  RunInfo info;
  info.nranks = o.gpus;
  info.library =
      fmt::format("NCCL {}.{}.{}", version / 10000, (version / 100) % 100, version % 100);

  const auto sweep = size_sweep(o, o.gpus);
  std::size_t max_send = 0, max_recv = 0;
  for (const auto& p : sweep) {
    const Counts c = counts(o.collective, p.count, o.gpus);
    max_send = std::max(max_send, c.send * o.type.bytes);
    max_recv = std::max(max_recv, c.recv * o.type.bytes);
  }

  Session session(cuda, nccl, o.gpus);
  auto& ranks = session.ranks();
  std::vector<int> devlist;
  for (int r = 0; r < o.gpus; ++r) {
    Rank& k = ranks[static_cast<std::size_t>(r)];
    cuda.check(cuda.device_get(&k.device, r), "device get");
    cuda.check(cuda.primary_retain(&k.context, k.device), "primary context");
    cuda.check(cuda.ctx_set_current(k.context), "set context");
    cuda.check(cuda.stream_create(&k.stream, 1), "stream create");  // CU_STREAM_NON_BLOCKING
    k.send_bytes = std::max<std::size_t>(max_send, 1);
    k.recv_bytes = std::max<std::size_t>(max_recv, 1);
    cuda.check(cuda.mem_alloc(&k.send, k.send_bytes), "allocate send buffer");
    cuda.check(cuda.mem_alloc(&k.recv, k.recv_bytes), "allocate receive buffer");
    char name[256] = {};
    cuda.device_name(name, sizeof name, k.device);
    int domain = 0, bus = 0, dev = 0;
    cuda.device_attribute(&domain, kCuDevAttrPciDomain, k.device);
    cuda.device_attribute(&bus, kCuDevAttrPciBus, k.device);
    cuda.device_attribute(&dev, kCuDevAttrPciDevice, k.device);
    info.devices.push_back(
        fmt::format("device {:2} [{:04x}:{:02x}:{:02x}.0] {}", r, domain, bus, dev, name));
    devlist.push_back(r);
  }
  std::vector<NcclComm> comms(ranks.size(), nullptr);
  nccl.check(nccl.comm_init_all(comms.data(), o.gpus, devlist.data()), "comm init");
  for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r].comm = comms[r];
  on_start(info);

  Runner runner(o, cuda, nccl, ranks);
  std::vector<Row> rows;
  for (const auto& p : sweep) {
    Row row;
    row.size = p;
    const double t_out = runner.time(p.count, false);
    const long long w_out = o.check > 0 ? runner.check(p.count, false) : -1;
    row.out_of_place = make_timing(o.collective, o.gpus, p.bytes, t_out, w_out);
    if (has_in_place(o.collective)) {
      const double t_in = runner.time(p.count, true);
      const long long w_in = o.check > 0 ? runner.check(p.count, true) : -1;
      row.in_place = make_timing(o.collective, o.gpus, p.bytes, t_in, w_in);
    }
    on_row(row);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace gpuorch::comm

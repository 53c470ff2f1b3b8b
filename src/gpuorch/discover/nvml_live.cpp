// The live NVML through dlopen. Only the handful of entry points gpuorch uses are declared here,
// with the layouts of NVML's public header (nvml.h); nothing NVIDIA ships is needed to build.
#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <climits>
#include <cstring>

#include "gpuorch/discover/nvml.hpp"

namespace gpuorch::discover {
namespace {

using Return = int;                       // nvmlReturn_t
using Device = struct NvmlDeviceOpaque*;  // nvmlDevice_t
constexpr Return kSuccess = 0;
constexpr unsigned kNameBuffer = 96;     // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBuffer = 96;     // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned kVersionBuffer = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
constexpr unsigned kMaxNvLinks = 18;     // NVML_NVLINK_MAX_LINKS

struct PciInfo {  // nvmlPciInfo_t (v3)
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct Memory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
struct Utilization {  // nvmlUtilization_t
  unsigned gpu, memory;
};
struct FieldValue {  // nvmlFieldValue_t
  unsigned field_id, scope_id;
  long long timestamp, latency_usec;
  unsigned value_type;
  Return nvml_return;
  unsigned long long value;  // nvmlValue_t, 8 bytes; read according to value_type
};
static_assert(sizeof(PciInfo) == 68 && sizeof(FieldValue) == 40, "NVML struct layout");

constexpr unsigned kTemperatureGpu = 0;          // NVML_TEMPERATURE_GPU
constexpr unsigned kClockSm = 1, kClockMem = 2;  // NVML_CLOCK_SM, NVML_CLOCK_MEM
constexpr unsigned kPcieTx = 0, kPcieRx = 1;     // NVML_PCIE_UTIL_{TX,RX}_BYTES
constexpr unsigned kFieldNvlinkDataTx = 138,
                   kFieldNvlinkDataRx = 139;  // NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_*

struct Api {
  Return (*init)() = nullptr;
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*driver_version)(char*, unsigned) = nullptr;
  Return (*cuda_version)(int*) = nullptr;
  Return (*count)(unsigned*) = nullptr;
  Return (*handle)(unsigned, Device*) = nullptr;
  Return (*name)(Device, char*, unsigned) = nullptr;
  Return (*uuid)(Device, char*, unsigned) = nullptr;
  Return (*pci)(Device, PciInfo*) = nullptr;
  Return (*memory)(Device, Memory*) = nullptr;
  Return (*cc)(Device, int*, int*) = nullptr;
  Return (*minor)(Device, unsigned*) = nullptr;
  Return (*link_state)(Device, unsigned, unsigned*) = nullptr;
  Return (*link_remote_pci)(Device, unsigned, PciInfo*) = nullptr;
  Return (*link_remote_type)(Device, unsigned, unsigned*) = nullptr;
  Return (*mig_mode)(Device, unsigned*, unsigned*) = nullptr;
  Return (*mig_max)(Device, unsigned*) = nullptr;
  Return (*mig_handle)(Device, unsigned, Device*) = nullptr;
  Return (*gi_id)(Device, unsigned*) = nullptr;
  Return (*ci_id)(Device, unsigned*) = nullptr;
  Return (*utilization)(Device, Utilization*) = nullptr;
  Return (*temperature)(Device, unsigned, unsigned*) = nullptr;
  Return (*power)(Device, unsigned*) = nullptr;
  Return (*clock)(Device, unsigned, unsigned*) = nullptr;
  Return (*pcie_throughput)(Device, unsigned, unsigned*) = nullptr;
  Return (*energy)(Device, unsigned long long*) = nullptr;
  Return (*field_values)(Device, int, FieldValue*) = nullptr;
};

template <typename F>
void bind(void* lib, F& fn, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (void* sym = dlsym(lib, n)) {
      // POSIX guarantees object and function pointers convert through dlsym's void*.
      std::memcpy(&fn, &sym, sizeof fn);
      return;
    }
  }
}

std::string c_string(const char* buf, std::size_t size) {
  return std::string(buf, strnlen(buf, size));
}

class LiveNvml final : public Nvml {
 public:
  LiveNvml(void* lib, Api api, std::string library)
      : lib_(lib), api_(api), library_(std::move(library)) {}
  ~LiveNvml() override {
    api_.shutdown();
    dlclose(lib_);
  }
  LiveNvml(const LiveNvml&) = delete;
  LiveNvml& operator=(const LiveNvml&) = delete;

  [[nodiscard]] std::string source() const override { return library_; }

  [[nodiscard]] std::string driver_version() const override {
    std::array<char, kVersionBuffer> buf{};
    if (api_.driver_version && api_.driver_version(buf.data(), kVersionBuffer) == kSuccess) {
      return c_string(buf.data(), buf.size());
    }
    return {};
  }

  [[nodiscard]] int cuda_driver_version() const override {
    int v = 0;
    return api_.cuda_version && api_.cuda_version(&v) == kSuccess ? v : 0;
  }

  std::vector<NvmlDevice> devices() override {
    std::vector<NvmlDevice> out;
    unsigned n = 0;
    if (api_.count(&n) != kSuccess) return out;
    for (unsigned i = 0; i < n && i < 64; ++i) {
      Device d = nullptr;
      if (api_.handle(i, &d) != kSuccess) continue;
      out.push_back(describe(i, d));
    }
    return out;
  }

  NvmlSample sample(unsigned index) override {
    NvmlSample s;
    Device d = nullptr;
    if (const Return r = api_.handle(index, &d); r != kSuccess) {
      s.error = error(r);
      return s;
    }
    if (Utilization u{}; api_.utilization && api_.utilization(d, &u) == kSuccess) {
      s.gpu_util = u.gpu;
      s.mem_copy_util = u.memory;
    }
    if (Memory m{}; api_.memory && api_.memory(d, &m) == kSuccess) {
      s.memory_used_bytes = m.used;
      s.memory_total_bytes = m.total;
    }
    unsigned v = 0;
    if (api_.temperature && api_.temperature(d, kTemperatureGpu, &v) == kSuccess) {
      s.temperature_c = v;
    }
    if (api_.power && api_.power(d, &v) == kSuccess) s.power_mw = v;
    if (api_.clock && api_.clock(d, kClockSm, &v) == kSuccess) s.sm_clock_mhz = v;
    if (api_.clock && api_.clock(d, kClockMem, &v) == kSuccess) s.mem_clock_mhz = v;
    if (api_.pcie_throughput && api_.pcie_throughput(d, kPcieTx, &v) == kSuccess) {
      s.pcie_tx_kbps = v;
    }
    if (api_.pcie_throughput && api_.pcie_throughput(d, kPcieRx, &v) == kSuccess) {
      s.pcie_rx_kbps = v;
    }
    if (unsigned long long e = 0; api_.energy && api_.energy(d, &e) == kSuccess) s.energy_mj = e;
    if (api_.field_values) {
      std::array<FieldValue, 2> f{};
      f[0].field_id = kFieldNvlinkDataTx;
      f[1].field_id = kFieldNvlinkDataRx;
      f[0].scope_id = f[1].scope_id = UINT_MAX;  // all links
      if (api_.field_values(d, 2, f.data()) == kSuccess) {
        if (f[0].nvml_return == kSuccess) s.nvlink_tx_kib = f[0].value;
        if (f[1].nvml_return == kSuccess) s.nvlink_rx_kib = f[1].value;
      }
    }
    return s;
  }

 private:
  [[nodiscard]] std::string error(Return r) const {
    const char* e = api_.error_string ? api_.error_string(r) : nullptr;
    return e ? std::string(e) : fmt::format("NVML error {}", r);
  }

  NvmlDevice describe(unsigned index, Device d) {
    NvmlDevice dev;
    dev.index = index;
    std::array<char, kNameBuffer> name{};
    if (api_.name(d, name.data(), kNameBuffer) == kSuccess)
      dev.name = c_string(name.data(), name.size());
    std::array<char, kUuidBuffer> uuid{};
    if (api_.uuid && api_.uuid(d, uuid.data(), kUuidBuffer) == kSuccess) {
      dev.uuid = c_string(uuid.data(), uuid.size());
    }
    if (PciInfo p{}; api_.pci && api_.pci(d, &p) == kSuccess) {
      dev.pci_bus_id = c_string(p.bus_id, sizeof p.bus_id);
    }
    if (Memory m{}; api_.memory && api_.memory(d, &m) == kSuccess) dev.memory_total_bytes = m.total;
    if (api_.cc) api_.cc(d, &dev.cc_major, &dev.cc_minor);
    if (unsigned m = 0; api_.minor && api_.minor(d, &m) == kSuccess)
      dev.minor_number = static_cast<int>(m);
    for (unsigned l = 0; api_.link_state && l < kMaxNvLinks; ++l) {
      unsigned state = 0;
      if (api_.link_state(d, l, &state) != kSuccess) continue;
      NvmlLink link;
      link.link = static_cast<int>(l);
      link.active = state == 1;  // NVML_FEATURE_ENABLED
      unsigned type = 0xff;
      link.remote_type = "unknown";
      if (api_.link_remote_type && api_.link_remote_type(d, l, &type) == kSuccess) {
        link.remote_type = type == 0   ? "gpu"
                           : type == 1 ? "ibmnpu"
                           : type == 2 ? "switch"
                                       : "unknown";
      }
      if (PciInfo p{}; link.remote_type == "gpu" && api_.link_remote_pci &&
                       api_.link_remote_pci(d, l, &p) == kSuccess) {
        link.remote_pci_bus_id = c_string(p.bus_id, sizeof p.bus_id);
      }
      dev.nvlinks.push_back(link);
    }
    unsigned current = 0, pending = 0;
    if (api_.mig_mode && api_.mig_mode(d, &current, &pending) == kSuccess) {
      dev.mig_current = static_cast<int>(current);
      dev.mig_pending = static_cast<int>(pending);
      unsigned max = 0;
      if (current == 1 && api_.mig_max && api_.mig_handle && api_.mig_max(d, &max) == kSuccess) {
        for (unsigned i = 0; i < max && i < 64; ++i) {
          Device m = nullptr;
          if (api_.mig_handle(d, i, &m) != kSuccess) continue;
          NvmlMigInstance inst;
          unsigned id = 0;
          if (api_.gi_id && api_.gi_id(m, &id) == kSuccess)
            inst.gpu_instance = static_cast<int>(id);
          if (api_.ci_id && api_.ci_id(m, &id) == kSuccess)
            inst.compute_instance = static_cast<int>(id);
          std::array<char, kUuidBuffer> u{};
          if (api_.uuid && api_.uuid(m, u.data(), kUuidBuffer) == kSuccess)
            inst.uuid = c_string(u.data(), u.size());
          std::array<char, kNameBuffer> n{};
          if (api_.name(m, n.data(), kNameBuffer) == kSuccess)
            inst.name = c_string(n.data(), n.size());
          if (Memory mem{}; api_.memory && api_.memory(m, &mem) == kSuccess) {
            inst.memory_total_bytes = mem.total;
          }
          dev.mig_instances.push_back(std::move(inst));
        }
      }
    }
    return dev;
  }

  void* lib_;
  Api api_;
  std::string library_;
};

}  // namespace

std::unique_ptr<Nvml> open_live_nvml(const std::string& library, std::string& why) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    why = e ? e : library + ": cannot be loaded";
    return nullptr;
  }
  Api a;
  bind(lib, a.init, {"nvmlInit_v2", "nvmlInit"});
  bind(lib, a.shutdown, {"nvmlShutdown"});
  bind(lib, a.error_string, {"nvmlErrorString"});
  bind(lib, a.driver_version, {"nvmlSystemGetDriverVersion"});
  bind(lib, a.cuda_version,
       {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  bind(lib, a.count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  bind(lib, a.handle, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  bind(lib, a.name, {"nvmlDeviceGetName"});
  bind(lib, a.uuid, {"nvmlDeviceGetUUID"});
  bind(lib, a.pci, {"nvmlDeviceGetPciInfo_v3"});
  bind(lib, a.memory, {"nvmlDeviceGetMemoryInfo"});
  bind(lib, a.cc, {"nvmlDeviceGetCudaComputeCapability"});
  bind(lib, a.minor, {"nvmlDeviceGetMinorNumber"});
  bind(lib, a.link_state, {"nvmlDeviceGetNvLinkState"});
  bind(lib, a.link_remote_pci, {"nvmlDeviceGetNvLinkRemotePciInfo_v2"});
  bind(lib, a.link_remote_type, {"nvmlDeviceGetNvLinkRemoteDeviceType"});
  bind(lib, a.mig_mode, {"nvmlDeviceGetMigMode"});
  bind(lib, a.mig_max, {"nvmlDeviceGetMaxMigDeviceCount"});
  bind(lib, a.mig_handle, {"nvmlDeviceGetMigDeviceHandleByIndex"});
  bind(lib, a.gi_id, {"nvmlDeviceGetGpuInstanceId"});
  bind(lib, a.ci_id, {"nvmlDeviceGetComputeInstanceId"});
  bind(lib, a.utilization, {"nvmlDeviceGetUtilizationRates"});
  bind(lib, a.temperature, {"nvmlDeviceGetTemperature"});
  bind(lib, a.power, {"nvmlDeviceGetPowerUsage"});
  bind(lib, a.clock, {"nvmlDeviceGetClockInfo"});
  bind(lib, a.pcie_throughput, {"nvmlDeviceGetPcieThroughput"});
  bind(lib, a.energy, {"nvmlDeviceGetTotalEnergyConsumption"});
  bind(lib, a.field_values, {"nvmlDeviceGetFieldValues"});
  if (!a.init || !a.shutdown || !a.count || !a.handle || !a.name) {
    why = library + ": not an NVML library (entry points missing)";
    dlclose(lib);
    return nullptr;
  }
  if (const Return r = a.init(); r != kSuccess) {
    const char* e = a.error_string ? a.error_string(r) : nullptr;
    why = fmt::format("nvmlInit failed: {}", e ? e : fmt::format("error {}", r));
    dlclose(lib);
    return nullptr;
  }
  return std::make_unique<LiveNvml>(lib, a, library);
}

}  // namespace gpuorch::discover

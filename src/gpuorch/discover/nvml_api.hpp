#pragma once
// The one NVML binding: every NVML entry point gpuorch calls, loaded at run time through
// base::SharedLibrary, with the types and layouts of NVML's public header (nvml.h), so nothing
// NVIDIA ships is needed to build. Discovery and telemetry (nvml_live.cpp) and the device plugin's
// XID watch (xid_watch.hpp) both use it. Entry points a driver lacks stay null; callers check.
#include <memory>
#include <string>

#include "gpuorch/base/shared_library.hpp"

namespace gpuorch::discover::nvml {

using Return = int;                           // nvmlReturn_t
using Device = struct NvmlDeviceOpaque*;      // nvmlDevice_t
using EventSet = struct NvmlEventSetOpaque*;  // nvmlEventSet_t
constexpr Return kSuccess = 0;
constexpr Return kTimeout = 10;          // NVML_ERROR_TIMEOUT
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
struct MemoryV2 {  // nvmlMemory_v2_t: adds what the driver reserves
  unsigned version;
  unsigned long long total, reserved, free, used;
};
// NVML_STRUCT_VERSION(Memory, 2): the struct's size, with the version in the top byte.
constexpr unsigned kMemoryV2Version = sizeof(MemoryV2) | (2u << 24);
struct FieldValue {  // nvmlFieldValue_t
  unsigned field_id, scope_id;
  long long timestamp, latency_usec;
  unsigned value_type;
  Return nvml_return;
  unsigned long long value;  // nvmlValue_t, 8 bytes; read according to value_type
};
struct DeviceAttributes {  // nvmlDeviceAttributes_t
  unsigned multiprocessor_count, shared_copy_engine_count, shared_decoder_count,
      shared_encoder_count, shared_jpeg_count, shared_ofa_count, gpu_instance_slice_count,
      compute_instance_slice_count;
  unsigned long long memory_size_mb;
};
struct EventData {  // nvmlEventData_t
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;
  unsigned gpu_instance_id;
  unsigned compute_instance_id;
};
// GPM (GPU performance monitoring, Hopper and later): two samples taken apart give activity
// ratios over the time between them (nvml.h "NVML GPM").
using GpmSample = struct NvmlGpmSampleOpaque*;  // nvmlGpmSample_t
struct GpmMetric {                              // nvmlGpmMetric_t
  unsigned metric_id;
  Return nvml_return;
  double value;
  const char *short_name, *long_name, *unit;
};
constexpr unsigned kGpmMetricSlots = 98;  // NVML_GPM_METRIC_MAX of version 1
struct GpmMetricsGet {                    // nvmlGpmMetricsGet_t
  unsigned version;                       // kGpmMetricsGetVersion
  unsigned num_metrics;
  GpmSample sample1, sample2;
  GpmMetric metrics[kGpmMetricSlots];
};
struct GpmSupport {  // nvmlGpmSupport_t
  unsigned version;  // kGpmSupportVersion
  unsigned is_supported_device;
};
constexpr unsigned kGpmMetricsGetVersion = 1, kGpmSupportVersion = 1;
static_assert(sizeof(PciInfo) == 68 && sizeof(FieldValue) == 40 && sizeof(EventData) == 32 &&
                  sizeof(MemoryV2) == 40 && sizeof(GpmMetric) == 40 &&
                  sizeof(DeviceAttributes) == 40,
              "NVML struct layout");

constexpr unsigned kTemperatureGpu = 0;          // NVML_TEMPERATURE_GPU
constexpr unsigned kClockSm = 1, kClockMem = 2;  // NVML_CLOCK_SM, NVML_CLOCK_MEM
constexpr unsigned kPcieTx = 0, kPcieRx = 1;     // NVML_PCIE_UTIL_{TX,RX}_BYTES
constexpr unsigned kFieldNvlinkDataTx = 138,
                   kFieldNvlinkDataRx = 139;                // NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_*
constexpr unsigned long long kEventXidCriticalError = 0x8;  // nvmlEventTypeXidCriticalError
constexpr unsigned kFieldMemoryTemp = 82;                   // NVML_FI_DEV_MEMORY_TEMP
constexpr unsigned kFieldPcieReplayCounter = 94;            // NVML_FI_DEV_PCIE_REPLAY_COUNTER
// nvmlGpmMetricId_t values (percentages 0-100 unless said otherwise).
constexpr unsigned kGpmGraphicsUtil = 1, kGpmSmUtil = 2, kGpmSmOccupancy = 3, kGpmAnyTensorUtil = 5,
                   kGpmDramBwUtil = 10, kGpmFp64Util = 11, kGpmFp32Util = 12, kGpmFp16Util = 13,
                   kGpmPcieTxPerSec = 20, kGpmPcieRxPerSec = 21,  // MiB/s
    kGpmNvlinkTotalRxPerSec = 60, kGpmNvlinkTotalTxPerSec = 61;   // MiB/s

struct Api {
  Return (*init)() = nullptr;
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*driver_version)(char*, unsigned) = nullptr;
  Return (*cuda_version)(int*) = nullptr;
  Return (*count)(unsigned*) = nullptr;
  Return (*handle)(unsigned, Device*) = nullptr;
  Return (*handle_by_uuid)(const char*, Device*) = nullptr;
  Return (*name)(Device, char*, unsigned) = nullptr;
  Return (*uuid)(Device, char*, unsigned) = nullptr;
  Return (*pci)(Device, PciInfo*) = nullptr;
  Return (*memory)(Device, Memory*) = nullptr;
  Return (*memory_v2)(Device, MemoryV2*) = nullptr;
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
  Return (*mig_attributes)(Device, DeviceAttributes*) = nullptr;  // MIG device handles only
  Return (*utilization)(Device, Utilization*) = nullptr;
  Return (*temperature)(Device, unsigned, unsigned*) = nullptr;
  Return (*power)(Device, unsigned*) = nullptr;
  Return (*clock)(Device, unsigned, unsigned*) = nullptr;
  Return (*pcie_throughput)(Device, unsigned, unsigned*) = nullptr;
  Return (*energy)(Device, unsigned long long*) = nullptr;
  Return (*encoder_util)(Device, unsigned*, unsigned*) = nullptr;
  Return (*decoder_util)(Device, unsigned*, unsigned*) = nullptr;
  Return (*remapped_rows)(Device, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  Return (*gpm_support)(Device, GpmSupport*) = nullptr;
  Return (*gpm_sample_alloc)(GpmSample*) = nullptr;
  Return (*gpm_sample_free)(GpmSample) = nullptr;
  Return (*gpm_sample_get)(Device, GpmSample) = nullptr;
  Return (*gpm_metrics_get)(GpmMetricsGet*) = nullptr;
  Return (*field_values)(Device, int, FieldValue*) = nullptr;
  Return (*event_set_create)(EventSet*) = nullptr;
  Return (*event_set_free)(EventSet) = nullptr;
  Return (*register_events)(Device, unsigned long long, EventSet) = nullptr;
  Return (*event_set_wait)(EventSet, EventData*, unsigned) = nullptr;
};

// NVML loaded and initialised (nvmlInit); nvmlShutdown and dlclose when it goes.
class Binding {
 public:
  // nullptr and `why` when the library does not load, is not NVML, or nvmlInit fails.
  static std::unique_ptr<Binding> open(const std::string& library, std::string& why);
  ~Binding();
  Binding(const Binding&) = delete;
  Binding& operator=(const Binding&) = delete;

  [[nodiscard]] const Api& api() const { return api_; }
  [[nodiscard]] const std::string& library() const { return lib_.name(); }
  // NVML's text for `r` ("NVML error N" when the driver has no nvmlErrorString).
  [[nodiscard]] std::string error(Return r) const;

 private:
  explicit Binding(const std::string& library) : lib_(library) {}
  base::SharedLibrary lib_;
  Api api_;
  bool initialised_ = false;
};

}  // namespace gpuorch::discover::nvml

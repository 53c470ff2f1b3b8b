#include "gpuorch/discover/nvml_api.hpp"

#include <fmt/format.h>

namespace gpuorch::discover::nvml {

std::unique_ptr<Binding> Binding::open(const std::string& library, std::string& why) {
  std::unique_ptr<Binding> b(new Binding(library));
  if (!b->lib_.loaded()) {
    why = b->lib_.error();
    return nullptr;
  }
  const base::SharedLibrary& l = b->lib_;
  Api& a = b->api_;
  l.bind(a.init, {"nvmlInit_v2", "nvmlInit"});
  l.bind(a.shutdown, {"nvmlShutdown"});
  l.bind(a.error_string, {"nvmlErrorString"});
  l.bind(a.driver_version, {"nvmlSystemGetDriverVersion"});
  l.bind(a.cuda_version, {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  l.bind(a.count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  l.bind(a.handle, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  l.bind(a.handle_by_uuid, {"nvmlDeviceGetHandleByUUID"});
  l.bind(a.name, {"nvmlDeviceGetName"});
  l.bind(a.uuid, {"nvmlDeviceGetUUID"});
  l.bind(a.pci, {"nvmlDeviceGetPciInfo_v3"});
  l.bind(a.memory, {"nvmlDeviceGetMemoryInfo"});
  l.bind(a.memory_v2, {"nvmlDeviceGetMemoryInfo_v2"});
  l.bind(a.cc, {"nvmlDeviceGetCudaComputeCapability"});
  l.bind(a.minor, {"nvmlDeviceGetMinorNumber"});
  l.bind(a.link_state, {"nvmlDeviceGetNvLinkState"});
  l.bind(a.link_remote_pci, {"nvmlDeviceGetNvLinkRemotePciInfo_v2"});
  l.bind(a.link_remote_type, {"nvmlDeviceGetNvLinkRemoteDeviceType"});
  l.bind(a.mig_mode, {"nvmlDeviceGetMigMode"});
  l.bind(a.mig_max, {"nvmlDeviceGetMaxMigDeviceCount"});
  l.bind(a.mig_handle, {"nvmlDeviceGetMigDeviceHandleByIndex"});
  l.bind(a.gi_id, {"nvmlDeviceGetGpuInstanceId"});
  l.bind(a.ci_id, {"nvmlDeviceGetComputeInstanceId"});
  l.bind(a.mig_attributes, {"nvmlDeviceGetAttributes_v2", "nvmlDeviceGetAttributes"});
  l.bind(a.utilization, {"nvmlDeviceGetUtilizationRates"});
  l.bind(a.temperature, {"nvmlDeviceGetTemperature"});
  l.bind(a.power, {"nvmlDeviceGetPowerUsage"});
  l.bind(a.clock, {"nvmlDeviceGetClockInfo"});
  l.bind(a.pcie_throughput, {"nvmlDeviceGetPcieThroughput"});
  l.bind(a.energy, {"nvmlDeviceGetTotalEnergyConsumption"});
  l.bind(a.encoder_util, {"nvmlDeviceGetEncoderUtilization"});
  l.bind(a.decoder_util, {"nvmlDeviceGetDecoderUtilization"});
  l.bind(a.remapped_rows, {"nvmlDeviceGetRemappedRows"});
  l.bind(a.gpm_support, {"nvmlGpmQueryDeviceSupport"});
  l.bind(a.gpm_sample_alloc, {"nvmlGpmSampleAlloc"});
  l.bind(a.gpm_sample_free, {"nvmlGpmSampleFree"});
  l.bind(a.gpm_sample_get, {"nvmlGpmSampleGet"});
  l.bind(a.gpm_metrics_get, {"nvmlGpmMetricsGet"});
  l.bind(a.field_values, {"nvmlDeviceGetFieldValues"});
  l.bind(a.event_set_create, {"nvmlEventSetCreate"});
  l.bind(a.event_set_free, {"nvmlEventSetFree"});
  l.bind(a.register_events, {"nvmlDeviceRegisterEvents"});
  l.bind(a.event_set_wait, {"nvmlEventSetWait_v2", "nvmlEventSetWait"});
  if (!a.init || !a.shutdown || !a.count || !a.handle || !a.name) {
    why = library + ": not an NVML library (entry points missing)";
    return nullptr;
  }
  if (const Return r = a.init(); r != kSuccess) {
    why = fmt::format("nvmlInit failed: {}", b->error(r));
    return nullptr;
  }
  b->initialised_ = true;
  return b;
}

Binding::~Binding() {
  if (initialised_) api_.shutdown();
}

std::string Binding::error(Return r) const {
  const char* e = api_.error_string ? api_.error_string(r) : nullptr;
  return e ? std::string(e) : fmt::format("NVML error {}", r);
}

}  // namespace gpuorch::discover::nvml

// The live NVML (through the one binding, nvml_api.hpp) behind the Nvml interface.
#include <fmt/format.h>

#include <array>
#include <climits>
#include <cstring>
#include <map>
#include <memory>

#include "gpuorch/discover/nvml.hpp"
#include "gpuorch/discover/nvml_api.hpp"

namespace gpuorch::discover {
namespace {

using namespace nvml;  // NOLINT(google-build-using-namespace): the binding's nvml.h names

std::string c_string(const char* buf, std::size_t size) {
  return std::string(buf, strnlen(buf, size));
}

int as_int(unsigned v) { return v > INT_MAX ? INT_MAX : static_cast<int>(v); }

topology::MigAttributes attributes_of(const DeviceAttributes& a) {
  topology::MigAttributes m;
  m.multiprocessors = as_int(a.multiprocessor_count);
  m.copy_engines = as_int(a.shared_copy_engine_count);
  m.decoders = as_int(a.shared_decoder_count);
  m.encoders = as_int(a.shared_encoder_count);
  m.jpeg_engines = as_int(a.shared_jpeg_count);
  m.ofa_engines = as_int(a.shared_ofa_count);
  m.gpu_instance_slices = as_int(a.gpu_instance_slice_count);
  m.compute_instance_slices = as_int(a.compute_instance_slice_count);
  return m;
}

class LiveNvml final : public Nvml {
 public:
  explicit LiveNvml(std::unique_ptr<Binding> binding)
      : binding_(std::move(binding)), api_(binding_->api()) {}
  ~LiveNvml() override {
    for (auto& [index, g] : gpm_) {
      if (g.previous != nullptr) api_.gpm_sample_free(g.previous);
      if (g.current != nullptr) api_.gpm_sample_free(g.current);
    }
  }
  LiveNvml(const LiveNvml&) = delete;
  LiveNvml& operator=(const LiveNvml&) = delete;

  [[nodiscard]] std::string source() const override { return binding_->library(); }

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
    // v2 separates what the driver reserves, which v1 counts as used (nvidia-smi shows v2's).
    if (MemoryV2 m{kMemoryV2Version, 0, 0, 0, 0};
        api_.memory_v2 && api_.memory_v2(d, &m) == kSuccess) {
      s.memory_used_bytes = m.used;
      s.memory_total_bytes = m.total;
      s.memory_reserved_bytes = m.reserved;
    } else if (Memory m1{}; api_.memory && api_.memory(d, &m1) == kSuccess) {
      s.memory_used_bytes = m1.used;
      s.memory_total_bytes = m1.total;
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
      std::array<FieldValue, 4> f{};
      f[0].field_id = kFieldNvlinkDataTx;
      f[1].field_id = kFieldNvlinkDataRx;
      f[0].scope_id = f[1].scope_id = UINT_MAX;  // all links
      f[2].field_id = kFieldMemoryTemp;
      f[3].field_id = kFieldPcieReplayCounter;
      if (api_.field_values(d, static_cast<int>(f.size()), f.data()) == kSuccess) {
        if (f[0].nvml_return == kSuccess) s.nvlink_tx_kib = f[0].value;
        if (f[1].nvml_return == kSuccess) s.nvlink_rx_kib = f[1].value;
        // An HBM part without a memory sensor answers success with 0: not a temperature.
        if (f[2].nvml_return == kSuccess && f[2].value > 0)
          s.memory_temperature_c = static_cast<unsigned>(f[2].value);
        if (f[3].nvml_return == kSuccess) s.pcie_replays = f[3].value;
      }
    }
    unsigned period_us = 0;
    if (api_.encoder_util && api_.encoder_util(d, &v, &period_us) == kSuccess) s.encoder_util = v;
    if (api_.decoder_util && api_.decoder_util(d, &v, &period_us) == kSuccess) s.decoder_util = v;
    if (unsigned corr = 0, unc = 0, pending = 0, failed = 0;
        api_.remapped_rows && api_.remapped_rows(d, &corr, &unc, &pending, &failed) == kSuccess) {
      s.remapped_rows_correctable = corr;
      s.remapped_rows_uncorrectable = unc;
      s.row_remap_pending = pending;
      s.row_remap_failure = failed;
    }
    s.gpm = gpm(index, d);
    s.mig = mig_memory(d);
    return s;
  }

 private:
  [[nodiscard]] std::string error(Return r) const { return binding_->error(r); }

  // Per device: whether GPM works, and the sample of the previous reading.
  struct GpmState {
    bool supported = false;
    GpmSample previous = nullptr, current = nullptr;
  };

  // Takes this reading's GPM sample and returns the metrics between it and the previous one.
  NvmlGpm gpm(unsigned index, Device d) {
    NvmlGpm out;
    if (!api_.gpm_support || !api_.gpm_sample_alloc || !api_.gpm_sample_free ||
        !api_.gpm_sample_get || !api_.gpm_metrics_get) {
      return out;
    }
    auto [it, first] = gpm_.try_emplace(index);
    GpmState& g = it->second;
    if (first) {
      GpmSupport support{kGpmSupportVersion, 0};
      g.supported = api_.gpm_support(d, &support) == kSuccess && support.is_supported_device != 0 &&
                    api_.gpm_sample_alloc(&g.previous) == kSuccess &&
                    api_.gpm_sample_alloc(&g.current) == kSuccess;
      if (g.supported && api_.gpm_sample_get(d, g.previous) != kSuccess) g.supported = false;
      return out;  // the first sample only starts the interval
    }
    if (!g.supported || api_.gpm_sample_get(d, g.current) != kSuccess) return out;
    static constexpr std::array<unsigned, 12> kIds = {kGpmGraphicsUtil,
                                                      kGpmSmUtil,
                                                      kGpmSmOccupancy,
                                                      kGpmAnyTensorUtil,
                                                      kGpmDramBwUtil,
                                                      kGpmFp64Util,
                                                      kGpmFp32Util,
                                                      kGpmFp16Util,
                                                      kGpmPcieTxPerSec,
                                                      kGpmPcieRxPerSec,
                                                      kGpmNvlinkTotalTxPerSec,
                                                      kGpmNvlinkTotalRxPerSec};
    auto get = std::make_unique<GpmMetricsGet>();
    get->version = kGpmMetricsGetVersion;
    get->num_metrics = static_cast<unsigned>(kIds.size());
    get->sample1 = g.previous;
    get->sample2 = g.current;
    for (std::size_t i = 0; i < kIds.size(); ++i) get->metrics[i].metric_id = kIds[i];
    if (api_.gpm_metrics_get(get.get()) == kSuccess) {
      std::array<std::optional<double>*, kIds.size()> into = {
          &out.graphics_util, &out.sm_util,       &out.sm_occupancy,    &out.tensor_util,
          &out.dram_bw_util,  &out.fp64_util,     &out.fp32_util,       &out.fp16_util,
          &out.pcie_tx_mibps, &out.pcie_rx_mibps, &out.nvlink_tx_mibps, &out.nvlink_rx_mibps};
      for (std::size_t i = 0; i < kIds.size(); ++i) {
        if (get->metrics[i].nvml_return == kSuccess) *into[i] = get->metrics[i].value;
      }
    }
    std::swap(g.previous, g.current);  // this sample starts the next interval
    return out;
  }

  // Memory of each MIG instance (the rest of NVML's readings are not given per instance).
  std::vector<NvmlMigSample> mig_memory(Device d) {
    std::vector<NvmlMigSample> out;
    unsigned current = 0, pending = 0, max = 0;
    if (!api_.mig_mode || api_.mig_mode(d, &current, &pending) != kSuccess || current != 1 ||
        !api_.mig_max || !api_.mig_handle || api_.mig_max(d, &max) != kSuccess) {
      return out;
    }
    for (unsigned i = 0; i < max && i < 64; ++i) {
      Device m = nullptr;
      unsigned gi = 0;
      if (api_.mig_handle(d, i, &m) != kSuccess || !api_.gi_id || api_.gi_id(m, &gi) != kSuccess)
        continue;
      NvmlMigSample ms;
      ms.gpu_instance = static_cast<int>(gi);
      if (Memory mem{}; api_.memory && api_.memory(m, &mem) == kSuccess) {
        ms.memory_used_bytes = mem.used;
        ms.memory_total_bytes = mem.total;
      }
      out.push_back(ms);
    }
    return out;
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
          if (DeviceAttributes at{};
              api_.mig_attributes && api_.mig_attributes(m, &at) == kSuccess) {
            inst.attributes = attributes_of(at);
          }
          dev.mig_instances.push_back(std::move(inst));
        }
      }
    }
    return dev;
  }

  std::unique_ptr<Binding> binding_;
  const Api& api_;
  std::map<unsigned, GpmState> gpm_;
};

}  // namespace

std::unique_ptr<Nvml> open_live_nvml(const std::string& library, std::string& why) {
  auto binding = Binding::open(library, why);
  if (!binding) return nullptr;
  return std::make_unique<LiveNvml>(std::move(binding));
}

}  // namespace gpuorch::discover

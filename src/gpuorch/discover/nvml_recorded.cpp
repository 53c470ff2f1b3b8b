// NVML answers replayed from a recording (nvml.json), and the writer of that format.
#include <fmt/format.h>

#include <filesystem>
#include <type_traits>

#include "gpuorch/base/read_file.hpp"
#include "gpuorch/discover/nvml.hpp"

namespace gpuorch::discover {
namespace {

using Json = nlohmann::json;
constexpr const char* kFormat = "gpuorch-nvml-recording/1";

// Thrown inside parsing only; turned into one problem line for the file.
struct Malformed {
  std::string what;
};

const Json& field(const Json& obj, const char* key, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key))
    throw Malformed{fmt::format("{}: missing '{}'", where, key)};
  return obj.at(key);
}

std::string str(const Json& obj, const char* key, const std::string& where) {
  const Json& v = field(obj, key, where);
  if (!v.is_string()) throw Malformed{fmt::format("{}: '{}' must be a string", where, key)};
  return v.get<std::string>();
}

std::int64_t num(const Json& obj, const char* key, const std::string& where, std::int64_t lo,
                 std::int64_t hi) {
  const Json& v = field(obj, key, where);
  if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi) {
    throw Malformed{fmt::format("{}: '{}' must be an integer in [{}, {}]", where, key, lo, hi)};
  }
  return v.get<std::int64_t>();
}

class RecordedNvml final : public Nvml {
 public:
  RecordedNvml(std::string source, std::string driver, int cuda, std::vector<NvmlDevice> devices,
               std::vector<std::vector<NvmlSample>> samples)
      : source_(std::move(source)),
        driver_(std::move(driver)),
        cuda_(cuda),
        devices_(std::move(devices)),
        samples_(std::move(samples)),
        next_(devices_.size(), 0) {}

  [[nodiscard]] std::string source() const override { return source_; }
  [[nodiscard]] std::string driver_version() const override { return driver_; }
  [[nodiscard]] int cuda_driver_version() const override { return cuda_; }
  std::vector<NvmlDevice> devices() override { return devices_; }

  NvmlSample sample(unsigned index) override {
    if (index >= samples_.size() || samples_[index].empty()) {
      NvmlSample s;
      s.error = "no recorded sample";
      return s;
    }
    // Replays the recorded readings in a loop, as a live GPU keeps answering.
    const auto& list = samples_[index];
    return list[next_[index]++ % list.size()];
  }

 private:
  std::string source_, driver_;
  int cuda_;
  std::vector<NvmlDevice> devices_;
  std::vector<std::vector<NvmlSample>> samples_;
  std::vector<std::size_t> next_;
};

// Every recorded reading field by its JSON key, for reading and writing alike.
template <typename Sample, typename F>
void for_each_field(Sample& s, F&& f) {
  f("gpu_util", s.gpu_util);
  f("mem_copy_util", s.mem_copy_util);
  f("memory_used_bytes", s.memory_used_bytes);
  f("memory_total_bytes", s.memory_total_bytes);
  f("memory_reserved_bytes", s.memory_reserved_bytes);
  f("temperature_c", s.temperature_c);
  f("memory_temperature_c", s.memory_temperature_c);
  f("power_mw", s.power_mw);
  f("sm_clock_mhz", s.sm_clock_mhz);
  f("mem_clock_mhz", s.mem_clock_mhz);
  f("pcie_tx_kbps", s.pcie_tx_kbps);
  f("pcie_rx_kbps", s.pcie_rx_kbps);
  f("energy_mj", s.energy_mj);
  f("nvlink_tx_kib", s.nvlink_tx_kib);
  f("nvlink_rx_kib", s.nvlink_rx_kib);
  f("pcie_replays", s.pcie_replays);
  f("encoder_util", s.encoder_util);
  f("decoder_util", s.decoder_util);
  f("remapped_rows_correctable", s.remapped_rows_correctable);
  f("remapped_rows_uncorrectable", s.remapped_rows_uncorrectable);
  f("row_remap_failure", s.row_remap_failure);
  f("row_remap_pending", s.row_remap_pending);
  f("last_xid", s.last_xid);
  f("gpm_graphics_util", s.gpm.graphics_util);
  f("gpm_sm_util", s.gpm.sm_util);
  f("gpm_sm_occupancy", s.gpm.sm_occupancy);
  f("gpm_tensor_util", s.gpm.tensor_util);
  f("gpm_dram_bw_util", s.gpm.dram_bw_util);
  f("gpm_fp64_util", s.gpm.fp64_util);
  f("gpm_fp32_util", s.gpm.fp32_util);
  f("gpm_fp16_util", s.gpm.fp16_util);
  f("gpm_pcie_tx_mibps", s.gpm.pcie_tx_mibps);
  f("gpm_pcie_rx_mibps", s.gpm.pcie_rx_mibps);
  f("gpm_nvlink_tx_mibps", s.gpm.nvlink_tx_mibps);
  f("gpm_nvlink_rx_mibps", s.gpm.nvlink_rx_mibps);
}

template <typename T>
void read_number(const Json& obj, const char* key, std::optional<T>& out) {
  if (!obj.contains(key)) return;
  const Json& v = obj.at(key);
  if constexpr (std::is_floating_point_v<T>) {
    if (v.is_number()) out = v.get<T>();
  } else {
    if (v.is_number_unsigned()) out = v.get<T>();
  }
}

NvmlSample parse_sample(const Json& j) {
  NvmlSample s;
  for_each_field(s, [&](const char* key, auto& field) { read_number(j, key, field); });
  if (j.contains("mig") && j.at("mig").is_array()) {
    for (const Json& m : j.at("mig")) {
      NvmlMigSample ms;
      if (m.contains("gi") && m.at("gi").is_number_integer())
        ms.gpu_instance = m.at("gi").get<int>();
      read_number(m, "memory_used_bytes", ms.memory_used_bytes);
      read_number(m, "memory_total_bytes", ms.memory_total_bytes);
      s.mig.push_back(ms);
    }
  }
  return s;
}

}  // namespace

std::unique_ptr<Nvml> open_recorded_nvml(const std::string& path, const std::string& display,
                                         Diagnostics& diag) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return nullptr;  // a recording without NVML
  std::string why;
  const auto text = base::read_bounded(path, base::kConfigFileMaxBytes, why);
  if (!text) {
    diag.problem(display, why);
    return nullptr;
  }
  Json root;
  try {
    root = Json::parse(*text);
  } catch (const Json::parse_error& e) {
    diag.problem(display, fmt::format("not JSON (byte {})", e.byte));
    return nullptr;
  } catch (const Json::exception&) {  // a number past the double range (2e996): no byte offset
    diag.problem(display, "not JSON (a number out of range)");
    return nullptr;
  }
  try {
    if (str(root, "format", "top level") != kFormat) {
      throw Malformed{fmt::format("format is not '{}'", kFormat)};
    }
    const std::string driver = str(root, "driver_version", "top level");
    const int cuda = static_cast<int>(num(root, "cuda_driver_version", "top level", 0, 1000000));
    const Json& list = field(root, "devices", "top level");
    if (!list.is_array() || list.size() > 64)
      throw Malformed{"'devices' must be a list of at most 64"};
    std::vector<NvmlDevice> devices;
    std::vector<std::vector<NvmlSample>> samples;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Json& d = list[i];
      const std::string where = fmt::format("devices[{}]", i);
      NvmlDevice dev;
      dev.index = static_cast<unsigned>(num(d, "index", where, 0, 63));
      dev.name = str(d, "name", where);
      dev.uuid = str(d, "uuid", where);
      dev.pci_bus_id = str(d, "pci_bus_id", where);
      dev.memory_total_bytes =
          static_cast<std::uint64_t>(num(d, "memory_total_bytes", where, 0, std::int64_t{1} << 50));
      const Json& cc = field(d, "compute_capability", where);
      if (!cc.is_array() || cc.size() != 2 || !cc[0].is_number_integer() ||
          !cc[1].is_number_integer()) {
        throw Malformed{where + ": 'compute_capability' must be [major, minor]"};
      }
      dev.cc_major = cc[0].get<int>();
      dev.cc_minor = cc[1].get<int>();
      dev.minor_number = static_cast<int>(num(d, "minor_number", where, -1, 1 << 20));
      const Json& links = field(d, "nvlinks", where);
      if (!links.is_array() || links.size() > 64)
        throw Malformed{where + ": 'nvlinks' must be a list"};
      for (const Json& l : links) {
        NvmlLink link;
        link.link = static_cast<int>(num(l, "link", where + ".nvlinks", 0, 63));
        const Json& active = field(l, "active", where + ".nvlinks");
        if (!active.is_boolean()) throw Malformed{where + ".nvlinks: 'active' must be true/false"};
        link.active = active.get<bool>();
        link.remote_type = str(l, "remote_type", where + ".nvlinks");
        link.remote_pci_bus_id = str(l, "remote_pci_bus_id", where + ".nvlinks");
        dev.nvlinks.push_back(std::move(link));
      }
      const Json& mig = field(d, "mig", where);
      dev.mig_current = static_cast<int>(num(mig, "current", where + ".mig", -1, 1));
      dev.mig_pending = static_cast<int>(num(mig, "pending", where + ".mig", -1, 1));
      const Json& inst = field(mig, "instances", where + ".mig");
      if (!inst.is_array() || inst.size() > 64)
        throw Malformed{where + ".mig: 'instances' must be a list"};
      for (const Json& m : inst) {
        NvmlMigInstance mi;
        mi.gpu_instance = static_cast<int>(num(m, "gi", where + ".mig", 0, 1 << 16));
        mi.compute_instance = static_cast<int>(num(m, "ci", where + ".mig", 0, 1 << 16));
        mi.uuid = str(m, "uuid", where + ".mig");
        mi.name = str(m, "name", where + ".mig");
        mi.memory_total_bytes = static_cast<std::uint64_t>(
            num(m, "memory_total_bytes", where + ".mig", 0, std::int64_t{1} << 50));
        if (m.contains("attributes")) {
          const Json& a = m.at("attributes");
          const std::string aw = where + ".mig.attributes";
          if (!a.is_object()) throw Malformed{aw + ": must be an object"};
          topology::MigAttributes at;
          for (const auto& [key, member] : topology::kMigAttributeFields) {
            at.*member = static_cast<int>(num(a, key, aw, 0, 1 << 16));
          }
          mi.attributes = at;
        }
        dev.mig_instances.push_back(std::move(mi));
      }
      std::vector<NvmlSample> ss;
      if (d.contains("samples") && d.at("samples").is_array()) {
        for (const Json& s : d.at("samples")) ss.push_back(parse_sample(s));
      }
      devices.push_back(std::move(dev));
      samples.push_back(std::move(ss));
    }
    return std::make_unique<RecordedNvml>(display, driver, cuda, std::move(devices),
                                          std::move(samples));
  } catch (const Malformed& m) {
    diag.problem(display, m.what);
  } catch (const Json::exception& e) {
    diag.problem(display, e.what());
  }
  return nullptr;
}

nlohmann::ordered_json record_nvml(Nvml& nvml, int samples) {
  nlohmann::ordered_json root;
  root["format"] = kFormat;
  root["driver_version"] = nvml.driver_version();
  root["cuda_driver_version"] = nvml.cuda_driver_version();
  root["devices"] = nlohmann::ordered_json::array();
  for (const auto& d : nvml.devices()) {
    nlohmann::ordered_json j;
    j["index"] = d.index;
    j["name"] = d.name;
    j["uuid"] = d.uuid;
    j["pci_bus_id"] = d.pci_bus_id;
    j["memory_total_bytes"] = d.memory_total_bytes;
    j["compute_capability"] = {d.cc_major, d.cc_minor};
    j["minor_number"] = d.minor_number;
    j["nvlinks"] = nlohmann::ordered_json::array();
    for (const auto& l : d.nvlinks) {
      j["nvlinks"].push_back({{"link", l.link},
                              {"active", l.active},
                              {"remote_type", l.remote_type},
                              {"remote_pci_bus_id", l.remote_pci_bus_id}});
    }
    j["mig"] = {{"current", d.mig_current},
                {"pending", d.mig_pending},
                {"instances", nlohmann::ordered_json::array()}};
    for (const auto& m : d.mig_instances) {
      nlohmann::ordered_json inst = {{"gi", m.gpu_instance},
                                     {"ci", m.compute_instance},
                                     {"uuid", m.uuid},
                                     {"name", m.name},
                                     {"memory_total_bytes", m.memory_total_bytes}};
      if (const auto& a = m.attributes) {
        for (const auto& [key, member] : topology::kMigAttributeFields) {
          inst["attributes"][key] = (*a).*member;
        }
      }
      j["mig"]["instances"].push_back(std::move(inst));
    }
    j["samples"] = nlohmann::ordered_json::array();
    for (int k = 0; k < samples; ++k) {
      const NvmlSample s = nvml.sample(d.index);
      nlohmann::ordered_json sj = nlohmann::ordered_json::object();
      for_each_field(s, [&](const char* key, const auto& v) {
        if (v) sj[key] = *v;
      });
      for (const auto& m : s.mig) {
        nlohmann::ordered_json mj = {{"gi", m.gpu_instance}};
        if (m.memory_used_bytes) mj["memory_used_bytes"] = *m.memory_used_bytes;
        if (m.memory_total_bytes) mj["memory_total_bytes"] = *m.memory_total_bytes;
        sj["mig"].push_back(mj);
      }
      j["samples"].push_back(sj);
    }
    root["devices"].push_back(j);
  }
  return root;
}

}  // namespace gpuorch::discover

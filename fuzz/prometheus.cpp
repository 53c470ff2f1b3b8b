// Prometheus rendering (/metrics) of a host read from topology JSON and a round of readings made
// from the input's bytes (NaN, infinities, huge values and error text included). The output is
// checked line by line: a comment, or `name{label="escaped",...} value`, nothing else, so a label
// value can never break out of its quotes or start a line of its own.
#include "gpuorch/telemetry/prometheus.hpp"

#include <cmath>
#include <cstring>
#include <optional>
#include <string_view>

#include "fuzz_support.hpp"
#include "gpuorch/topology/json_read.hpp"

namespace {

// Bytes in order, as doubles and text; zeros once they run out.
struct Bytes {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t at = 0;
  std::uint8_t byte() { return at < size ? data[at++] : 0; }
  std::optional<double> value() {
    if (byte() % 4 == 0) return std::nullopt;
    double v = 0;
    for (std::size_t i = 0; i < sizeof v; ++i) reinterpret_cast<std::uint8_t*>(&v)[i] = byte();
    return v;
  }
  std::string text() {
    std::string s(byte() % 16, ' ');
    for (char& c : s) c = static_cast<char>(byte());
    return s;
  }
};

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == ':';
}

void check_line(std::string_view line) {
  if (line.empty()) __builtin_trap();
  if (line[0] == '#') return;
  std::size_t i = 0;
  while (i < line.size() && name_char(line[i])) ++i;
  if (i == 0) __builtin_trap();
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      while (i < line.size() && name_char(line[i])) ++i;
      if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') __builtin_trap();
      i += 2;
      while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
      if (i >= line.size()) __builtin_trap();
      ++i;  // the closing quote
      if (i < line.size() && line[i] == ',') ++i;
    }
    if (i >= line.size()) __builtin_trap();
    ++i;
  }
  if (i >= line.size() || line[i] != ' ' || i + 1 == line.size()) __builtin_trap();
}

}  // namespace

// Input: topology JSON, a NUL byte, then the bytes the readings are made of.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpuorch;
  const auto* nul = static_cast<const std::uint8_t*>(std::memchr(data, 0, size));
  const std::size_t json_size = nul ? static_cast<std::size_t>(nul - data) : size;
  topology::Host host;
  try {
    host = topology::host_from_json_text(fuzz::text_of(data, json_size), "t.json");
  } catch (const base::InputError&) {
    return 0;
  }
  Bytes bytes{data + json_size, size - json_size};
  bytes.byte();  // the NUL
  telemetry::Round round;
  round.duration_s = bytes.value().value_or(0);
  for (const auto& g : host.gpus) {
    telemetry::GpuSample s;
    s.gpu = g.index;
    s.ok = bytes.byte() % 8 != 0;
    if (!s.ok) s.error = bytes.text();
    for (auto field :
         {&telemetry::GpuSample::gpu_util, &telemetry::GpuSample::mem_copy_util,
          &telemetry::GpuSample::memory_used_mib, &telemetry::GpuSample::memory_total_mib,
          &telemetry::GpuSample::temperature_c, &telemetry::GpuSample::power_w,
          &telemetry::GpuSample::sm_clock_mhz, &telemetry::GpuSample::mem_clock_mhz,
          &telemetry::GpuSample::pcie_tx_kbps, &telemetry::GpuSample::pcie_rx_kbps,
          &telemetry::GpuSample::energy_mj, &telemetry::GpuSample::nvlink_tx_bytes,
          &telemetry::GpuSample::nvlink_rx_bytes, &telemetry::GpuSample::memory_free_mib,
          &telemetry::GpuSample::last_xid, &telemetry::GpuSample::tensor_active,
          &telemetry::GpuSample::nvlink_mb_per_s}) {
      s.*field = bytes.value();
    }
    round.gpus.push_back(std::move(s));
  }
  const telemetry::ExporterHealth health{bytes.byte(), bytes.byte()};
  std::string out = telemetry::render_metrics(host, round, health);
  out += telemetry::render_sample_age(bytes.value().value_or(0));
  std::string_view rest(out);
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    if (nl == std::string_view::npos) __builtin_trap();  // every line ends with '\n'
    check_line(rest.substr(0, nl));
    rest.remove_prefix(nl + 1);
  }
  return 0;
}

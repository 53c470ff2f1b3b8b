#include "gpuorch/comm/tune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace gpuorch::comm {
namespace {

Spread spread(const std::vector<double>& v) {
  Spread s;
  if (v.empty()) return s;
  s.n = static_cast<int>(v.size());
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  for (const double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  return s;
}

std::string human(std::size_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0) return fmt::format("{}G", bytes >> 30);
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) return fmt::format("{}M", bytes >> 20);
  if (bytes >= (1ull << 10) && bytes % (1ull << 10) == 0) return fmt::format("{}K", bytes >> 10);
  return fmt::format("{}", bytes);
}

}  // namespace

std::string NcclSetting::name() const {
  if (is_default()) return "default";
  return fmt::format("{}/{}", algo.empty() ? "*" : algo, proto.empty() ? "*" : proto);
}

std::vector<NcclSetting> settings_to_sweep(const std::vector<std::string>& algos,
                                           const std::vector<std::string>& protos,
                                           bool each_alone) {
  std::vector<NcclSetting> out{{}};
  for (const auto& a : algos) {
    for (const auto& p : protos) out.push_back({a, p});
  }
  if (each_alone) {
    for (const auto& a : algos) out.push_back({a, ""});
    for (const auto& p : protos) out.push_back({"", p});
  }
  return out;
}

std::vector<SettingCurve> setting_curves(const std::vector<NcclSetting>& settings,
                                         const std::vector<std::string>& failed,
                                         const std::vector<TuneSample>& samples) {
  std::vector<SettingCurve> out;
  for (std::size_t s = 0; s < settings.size(); ++s) {
    if (s < failed.size() && !failed[s].empty()) continue;
    std::map<std::size_t, std::array<double, 3>> by_size;  // busbw sum, time sum, count
    for (const auto& x : samples) {
      if (x.setting != s) continue;
      auto& a = by_size[x.bytes];
      a[0] += x.busbw;
      a[1] += x.time_us;
      a[2] += 1;
    }
    if (by_size.empty()) continue;
    SettingCurve c{settings[s], {}};
    for (const auto& [bytes, a] : by_size) {
      c.points.push_back({double(bytes), a[0] / a[2], a[1] / a[2]});
    }
    out.push_back(std::move(c));
  }
  return out;
}

TuneResult analyze_tuning(const std::string& collective, const std::vector<NcclSetting>& settings,
                          const std::vector<std::string>& failed,
                          const std::vector<TuneSample>& samples) {
  TuneResult r;
  r.collective = collective;
  r.settings = settings;
  r.failed = failed;
  r.failed.resize(settings.size());
  // busbw per size, per setting, over repeats
  std::map<std::size_t, std::vector<std::vector<double>>> by_size;
  for (const auto& s : samples) {
    auto& per = by_size[s.bytes];
    per.resize(settings.size());
    per[s.setting].push_back(s.busbw);
  }
  std::vector<bool> ever_beats(settings.size(), false), ever_loses(settings.size(), false);
  for (auto& [bytes, per] : by_size) {
    SizeVerdict v;
    v.bytes = bytes;
    v.by_default = spread(per[0]);
    for (std::size_t i = 0; i < per.size(); ++i) {
      const Spread s = spread(per[i]);
      if (s.n > 0 && s.mean > spread(per[v.best]).mean) v.best = i;
      if (i == 0 || s.n == 0 || v.by_default.n == 0) continue;
      if (s.min > v.by_default.max) ever_beats[i] = true;
      if (s.max < v.by_default.min) ever_loses[i] = true;
    }
    v.by_best = spread(per[v.best]);
    if (v.by_default.n > 0) {
      v.beats_default = v.best != 0 && v.by_best.min > v.by_default.max;
      v.gain = v.by_default.mean > 0 ? v.by_best.mean / v.by_default.mean - 1 : 0;
      if (v.by_default.mean > 0) {
        r.noise = std::max(r.noise, (v.by_default.max - v.by_default.min) / v.by_default.mean);
      }
    }
    // A range groups sizes with the same winner; a winner within noise is NCCL's default.
    const std::size_t winner = v.beats_default ? v.best : 0;
    if (!r.ranges.empty() && r.ranges.back().best == winner) {
      r.ranges.back().to = bytes;
    } else {
      r.ranges.push_back({bytes, bytes, winner, v.beats_default});
    }
    r.sizes.push_back(v);
  }
  // The env file can hold one setting: the one that wins most sizes beyond noise and never loses.
  std::size_t best_wins = 0;
  for (std::size_t i = 1; i < settings.size(); ++i) {
    if (!ever_beats[i] || ever_loses[i]) continue;
    std::size_t wins = 0;
    for (const auto& v : r.sizes) wins += v.beats_default && v.best == i ? 1 : 0;
    if (wins > best_wins) {
      best_wins = wins;
      r.recommended = i;
    }
  }
  return r;
}

std::string tune_env_file(const std::vector<TuneResult>& results, const std::string& header) {
  std::string out = fmt::format("# {}\n", header);
  out += "# NVLink multicast (NVLS) stays off in everything gpuorch starts.\nNCCL_NVLS_ENABLE=0\n";
  const TuneResult* chosen = nullptr;
  for (const auto& r : results) {
    if (r.recommended == 0 && std::none_of(r.ranges.begin(), r.ranges.end(),
                                           [](const SizeRange& g) { return g.beats_default; })) {
      out += fmt::format("# {}: NCCL's default is best at the measured sizes (within noise)\n",
                         r.collective);
    } else if (r.recommended == 0) {
      // Winners of some sizes only: NCCL_ALGO/NCCL_PROTO apply to every size, so they stay
      // suggestions for whoever runs only those sizes.
      out += fmt::format(
          "# {}: no single setting beats NCCL's default without losing at another size; per "
          "range:\n",
          r.collective);
      for (const auto& g : r.ranges) {
        if (!g.beats_default) continue;
        const NcclSetting& s = r.settings[g.best];
        out += fmt::format("#   {}..{} B:{}{}\n", g.from, g.to,
                           s.algo.empty() ? "" : " NCCL_ALGO=" + s.algo,
                           s.proto.empty() ? "" : " NCCL_PROTO=" + s.proto);
      }
    } else if (chosen == nullptr) {
      chosen = &r;
    } else {
      out += fmt::format(
          "# {}: {} also wins, but NCCL_ALGO/NCCL_PROTO apply to every collective; kept {}'s\n",
          r.collective, r.settings[r.recommended].name(), chosen->collective);
    }
  }
  if (chosen != nullptr) {
    const NcclSetting& s = chosen->settings[chosen->recommended];
    out +=
        fmt::format("# {}: {} beats NCCL's default beyond noise\n", chosen->collective, s.name());
    if (!s.algo.empty()) out += fmt::format("NCCL_ALGO={}\n", s.algo);
    if (!s.proto.empty()) out += fmt::format("NCCL_PROTO={}\n", s.proto);
  }
  return out;
}

std::string tune_table(const TuneResult& r) {
  std::string out = fmt::format(
      "# {}: out-of-place busbw (GB/s), mean (min..max) over repeats\n"
      "#{:>11}  {:>25}  {:>12}  {:>25}  {:>7}  {}\n",
      r.collective, "size", "default", "best", "best busbw", "gain", "beyond noise");
  for (const auto& v : r.sizes) {
    out += fmt::format(
        "{:>12}  {:>8.2f} ({:>6.2f}..{:>6.2f})  {:>12}  {:>8.2f} ({:>6.2f}..{:>6.2f})  {:>+6.1f}%  "
        "{}\n",
        v.bytes, v.by_default.mean, v.by_default.min, v.by_default.max, r.settings[v.best].name(),
        v.by_best.mean, v.by_best.min, v.by_best.max, 100 * v.gain, v.beats_default ? "yes" : "no");
  }
  for (std::size_t i = 0; i < r.settings.size(); ++i) {
    if (!r.failed[i].empty()) {
      out += fmt::format("# {} did not run: {}\n", r.settings[i].name(), r.failed[i]);
    }
  }
  for (const auto& g : r.ranges) {
    out += fmt::format("# {}..{}: {}\n", human(g.from), human(g.to),
                       g.beats_default
                           ? r.settings[g.best].name() + " beats the default"
                           : std::string("NCCL's default (nothing beats it beyond noise)"));
  }
  out += fmt::format("# noise: repeats of the default differ by up to {:.1f}%\n", 100 * r.noise);
  const bool some = std::any_of(r.ranges.begin(), r.ranges.end(),
                                [](const SizeRange& g) { return g.beats_default; });
  if (r.recommended != 0) {
    out += fmt::format("# verdict: {} beats the default\n", r.settings[r.recommended].name());
  } else if (some) {
    out +=
        "# verdict: some sizes have a faster setting (above), but none beats the default at "
        "every size without losing elsewhere; the env file keeps NCCL's default\n";
  } else {
    out += "# verdict: the default is already best at these sizes\n";
  }
  return out;
}

nlohmann::ordered_json tune_json(const TuneResult& r) {
  auto sp = [](const Spread& s) {
    return nlohmann::ordered_json{{"mean", s.mean}, {"min", s.min}, {"max", s.max}, {"n", s.n}};
  };
  nlohmann::ordered_json j;
  j["collective"] = r.collective;
  auto& settings = j["settings"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < r.settings.size(); ++i) {
    settings.push_back({{"name", r.settings[i].name()},
                        {"NCCL_ALGO", r.settings[i].algo},
                        {"NCCL_PROTO", r.settings[i].proto},
                        {"failed", r.failed[i]}});
  }
  auto& sizes = j["sizes"] = nlohmann::ordered_json::array();
  for (const auto& v : r.sizes) {
    sizes.push_back({{"size_bytes", v.bytes},
                     {"default_busbw_gbps", sp(v.by_default)},
                     {"best", r.settings[v.best].name()},
                     {"best_busbw_gbps", sp(v.by_best)},
                     {"gain", v.gain},
                     {"beats_default", v.beats_default}});
  }
  auto& ranges = j["ranges"] = nlohmann::ordered_json::array();
  for (const auto& g : r.ranges) {
    ranges.push_back({{"from_bytes", g.from},
                      {"to_bytes", g.to},
                      {"best", r.settings[g.best].name()},
                      {"beats_default", g.beats_default}});
  }
  j["noise"] = r.noise;
  j["recommended"] = r.settings[r.recommended].name();
  return j;
}

}  // namespace gpuorch::comm

#pragma once
// `gpuorch tune nccl`: which NCCL_ALGO x NCCL_PROTO setting moves the most bus bandwidth per
// message size, against NCCL's own choice, with the repeat-to-repeat spread as the noise floor.
// The sweep (child processes, one communicator per setting) lives in the CLI; this is the
// arithmetic, the env file and the JSON, testable without a GPU.
#include <array>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuorch::comm {

struct NcclSetting {
  std::string algo;   // NCCL_ALGO; empty: NCCL chooses
  std::string proto;  // NCCL_PROTO; empty: NCCL chooses
  bool is_default() const { return algo.empty() && proto.empty(); }
  std::string name() const;  // "default", "Ring/LL128"
};

// Every setting to try: NCCL's default first, then algos x protos; with `each_alone`, then each
// algorithm with NCCL choosing the protocol and each protocol with NCCL choosing the algorithm
// (what a job that sets only NCCL_ALGO or only NCCL_PROTO runs, which doctor prices).
std::vector<NcclSetting> settings_to_sweep(const std::vector<std::string>& algos,
                                           const std::vector<std::string>& protos,
                                           bool each_alone = false);

// One size of one repeat of one setting: out-of-place busbw and time.
struct TuneSample {
  std::size_t setting = 0;  // index into the settings
  int repeat = 0;
  std::size_t bytes = 0;
  double busbw = 0;    // GB/s
  double time_us = 0;  // per op
};

struct Spread {
  double mean = 0, min = 0, max = 0;
  int n = 0;
};

struct SizeVerdict {
  std::size_t bytes = 0;
  Spread by_default;
  std::size_t best = 0;  // setting index with the highest mean busbw
  Spread by_best;
  // The best setting's slowest repeat beats the default's fastest: a gain beyond the noise.
  bool beats_default = false;
  double gain = 0;  // best mean / default mean - 1
};

struct SizeRange {
  std::size_t from = 0, to = 0;  // bytes, inclusive
  std::size_t best = 0;
  bool beats_default = false;
};

struct TuneResult {
  std::string collective;
  std::vector<NcclSetting> settings;
  std::vector<std::string> failed;  // per setting: why it did not run ("" when it did)
  std::vector<SizeVerdict> sizes;
  std::vector<SizeRange> ranges;  // consecutive sizes with the same winner
  // The setting to put in the env file: one that beats the default beyond noise somewhere and is
  // never beaten by it beyond noise; 0 (the default) otherwise.
  std::size_t recommended = 0;
  double noise = 0;  // largest relative spread (max-min)/mean of the default over the sizes
};

// One setting's curve: per size, the mean over the repeats of out-of-place busbw and time.
struct SettingCurve {
  NcclSetting setting;
  std::vector<std::array<double, 3>> points;  // bytes, busbw GB/s, time us
};
// The curves of the settings that ran (failed[s] empty), in the settings' order.
std::vector<SettingCurve> setting_curves(const std::vector<NcclSetting>& settings,
                                         const std::vector<std::string>& failed,
                                         const std::vector<TuneSample>& samples);

TuneResult analyze_tuning(const std::string& collective, const std::vector<NcclSetting>& settings,
                          const std::vector<std::string>& failed,
                          const std::vector<TuneSample>& samples);

// KEY=VALUE lines for `gpuorch launch --env-file`: NCCL_NVLS_ENABLE=0 always, NCCL_ALGO /
// NCCL_PROTO only when a setting beats the default (comments say what was measured).
std::string tune_env_file(const std::vector<TuneResult>& results, const std::string& header);

std::string tune_table(const TuneResult& r);
nlohmann::ordered_json tune_json(const TuneResult& r);

}  // namespace gpuorch::comm

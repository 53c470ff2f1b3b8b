// gpuorch doctor utilisation / data: the checks that measure for a while before they judge.
#include "cli/doctor_measure.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <optional>

#include "gpuorch/base/atomic_file.hpp"
#include "gpuorch/base/error.hpp"
#include "gpuorch/comm/bench.hpp"
#include "gpuorch/discover/diagnostics.hpp"
#include "gpuorch/discover/nvml.hpp"
#include "gpuorch/discover/tree.hpp"
#include "gpuorch/doctor/data.hpp"
#include "gpuorch/doctor/utilisation.hpp"

namespace gpuorch::cli {
namespace {

struct UtilFlags {
  double seconds = 10, interval = 0.5;
  double starved_below = 60;
  std::string record, replay, root = "/", nvml_library = "libnvidia-ml.so.1";
  bool json = false;
};

// The window: replayed, or sampled from the live host (or a recorded tree with nvml.json).
doctor::UtilRecording take_window(const UtilFlags& f, std::string& input) {
  if (!f.replay.empty()) {
    input = "recording " + f.replay;
    return doctor::read_utilisation(f.replay);
  }
  if (!(f.interval >= 0.05 && f.interval <= 60)) {
    base::fail_input("--interval must be between 0.05 and 60 seconds");
  }
  if (!(f.seconds > 0 && f.seconds <= 3600)) {
    base::fail_input("--seconds must be more than 0 and at most 3600");
  }
  if (!std::filesystem::is_directory(f.root)) base::fail_input(f.root, 0, "not a directory");
  if (!f.record.empty()) base::check_output("--record", f.record);
  const discover::Tree tree(f.root, nullptr);  // processes come and go while sampled
  std::unique_ptr<discover::Nvml> nvml;
  if (tree.live()) {
    std::string why;
    nvml = discover::open_live_nvml(f.nvml_library, why);
    if (!nvml) {
      base::fail_input(fmt::format(
          "doctor utilisation: no NVML on this host ({}); nothing to sample (replay a recording "
          "with --replay FILE)",
          why));
    }
    input = "live host";
  } else {
    discover::Diagnostics diag;
    const std::string path = (tree.root() / "nvml.json").string();
    nvml = discover::open_recorded_nvml(path, path, diag);
    if (!nvml) {
      const auto problems = diag.problems();
      base::fail_input(path, 0,
                       problems.empty() ? std::string("no NVML recording") : problems.front());
    }
    input = "recorded tree " + f.root;
  }
  auto r = doctor::sample_utilisation(tree, *nvml, f.seconds, f.interval);
  if (!f.record.empty()) {
    // Process names come from /proc and may hold any bytes: invalid UTF-8 is replaced.
    const auto text = doctor::utilisation_json(r).dump(
        1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    base::write_file_atomically(f.record, text + "\n");
    input += " (recorded to " + f.record + ")";
  }
  return r;
}

int run_utilisation(const UtilFlags& f) {
  if (!(f.starved_below >= 0 && f.starved_below <= 100)) {
    base::fail_input("--starved-below must be a percentage (0 to 100)");
  }
  std::string input;
  const auto window = take_window(f, input);
  doctor::UtilThresholds t;
  t.starved_below = f.starved_below;
  return print_findings({{"utilisation", input, doctor::check_utilisation(window, t)}}, f.json);
}

struct DataFlags {
  doctor::DataReadOptions read;
  std::optional<double> samples_per_second;
  std::string sample_bytes, max_bytes = "16G";
  std::optional<int> gpus;
  bool json = false;
};

int run_data(DataFlags f) {
  if (!(f.read.seconds > 0 && f.read.seconds <= 3600)) {
    base::fail_input("--seconds must be more than 0 and at most 3600");
  }
  f.read.max_bytes = comm::parse_size(f.max_bytes, "--max-bytes");
  if (f.read.max_bytes == 0) base::fail_input("--max-bytes must be more than 0");
  std::optional<doctor::DataNeed> need;
  if (f.samples_per_second.has_value() != !f.sample_bytes.empty()) {
    base::fail_input("--samples-per-second and --sample-bytes go together");
  }
  if (f.samples_per_second) {
    if (!(*f.samples_per_second > 0 && *f.samples_per_second < 1e12)) {
      base::fail_input("--samples-per-second must be a positive number");
    }
    need = doctor::DataNeed{*f.samples_per_second,
                            comm::parse_size(f.sample_bytes, "--sample-bytes"), f.gpus.value_or(1)};
    if (need->sample_bytes == 0) base::fail_input("--sample-bytes must be more than 0");
  } else if (f.gpus) {
    base::fail_input("--gpus needs --samples-per-second and --sample-bytes");
  }
  const auto result = doctor::measure_read(f.read);
  return print_findings({{"data", f.read.path, doctor::check_data(result, need)}}, f.json);
}

}  // namespace

void add_doctor_measure(CLI::App& doctor, Action& action) {
  auto u = std::make_shared<UtilFlags>();
  CLI::App* util = doctor.add_subcommand(
      "utilisation",
      "Sample each GPU's SM utilisation, memory and PCIe traffic and the CPU use of the processes "
      "that hold it (per thread, DataLoader workers included) for --seconds, then flag GPUs that "
      "are starved and name the likely cause: data loading in the main process, CPU-bound "
      "preprocessing, unoverlapped input copies, or too little work per step.");
  util->alias("utilization");
  util->add_option("--seconds", u->seconds, "How long to sample")->capture_default_str();
  util->add_option("--interval", u->interval, "Seconds between samples")->capture_default_str();
  util->add_option("--starved-below", u->starved_below,
                   "Average SM utilisation (%) under which a GPU in use is starved")
      ->capture_default_str();
  auto* record = util->add_option("--record", u->record,
                                  "Also write the samples to FILE (replayed by --replay)");
  util->add_option("--replay", u->replay,
                   "Judge a recording (--record's file) instead of sampling this host")
      ->excludes(record);
  util->add_option("--sysfs-root", u->root,
                   "Sample a recorded tree (proc/ and nvml.json) instead of the live host")
      ->capture_default_str();
  util->add_option("--nvml-library", u->nvml_library, "NVML library to dlopen")
      ->capture_default_str();
  util->add_flag("--json", u->json, "Print the findings as JSON (schema gpuorch.doctor/v1)");
  util->callback([u, &action] { action = [u] { return run_utilisation(*u); }; });

  auto d = std::make_shared<DataFlags>();
  CLI::App* data = doctor.add_subcommand(
      "data",
      "Measure how fast a dataset reads (a file, or every file under a directory; several "
      "threads, O_DIRECT) and compare it with what the GPUs consume (samples/s x bytes per "
      "sample x GPUs).");
  data->add_option("PATH", d->read.path, "The dataset: a file or a directory")->required();
  data->add_option("--samples-per-second", d->samples_per_second,
                   "Samples per second one GPU trains on");
  data->add_option("--sample-bytes", d->sample_bytes,
                   "Bytes of one sample as stored (K, M, G: powers of 1024)");
  data->add_option("--gpus", d->gpus, "GPUs reading the dataset (default 1)")
      ->check(CLI::Range(1, 1 << 20));
  data->add_option("--threads", d->read.threads, "Reading threads")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  data->add_option("--seconds", d->read.seconds, "Stop reading after this long")
      ->capture_default_str();
  data->add_option("--max-bytes", d->max_bytes, "Stop reading after this many bytes")
      ->capture_default_str();
  data->add_flag("--direct,!--no-direct", d->read.direct,
                 "Read with O_DIRECT, past the page cache (default; falls back where the "
                 "filesystem refuses it)");
  data->add_flag("--json", d->json, "Print the findings as JSON (schema gpuorch.doctor/v1)");
  data->callback([d, &action] { action = [d] { return run_data(*d); }; });
}

}  // namespace gpuorch::cli

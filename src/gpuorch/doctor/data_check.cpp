// Read throughput against need. MB is 10^6 bytes, as storage is sold and measured.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gpuorch/doctor/data.hpp"

namespace gpuorch::doctor {
namespace {

std::string mb(double bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

}  // namespace

double DataReadResult::mb_per_second() const {
  return seconds > 0 ? static_cast<double>(bytes) / 1e6 / seconds : 0;
}

double DataNeed::mb_per_second() const {
  return samples_per_second * static_cast<double>(sample_bytes) * gpus / 1e6;
}

std::vector<Finding> check_data(const DataReadResult& r, const std::optional<DataNeed>& need) {
  std::vector<Finding> out;
  const double got = r.mb_per_second();
  std::string evidence = fmt::format(
      "read {} in {:.2f} s with {} thread(s), {}: {:.0f} MB/s; {} of {} file(s) read (dataset "
      "{})",
      mb(static_cast<double>(r.bytes)), r.seconds, r.threads,
      r.direct_asked && r.direct_refused == 0 ? "O_DIRECT" : "through the page cache", got,
      r.files_read, r.files, mb(static_cast<double>(r.dataset_bytes)));
  if (r.direct_asked && r.direct_refused > 0) {
    out.push_back({Severity::kInfo, "data.no-direct-io",
                   fmt::format("the filesystem refused O_DIRECT for {} of {} file(s) read: they "
                               "were read through the page cache, so a cached dataset reads "
                               "faster here than from its storage",
                               r.direct_refused, r.files_read),
                   "open(O_DIRECT) or the first read answered EINVAL", ""});
  } else if (!r.direct_asked) {
    out.push_back({Severity::kInfo, "data.no-direct-io",
                   "read through the page cache (--no-direct): a cached dataset reads faster here "
                   "than from its storage",
                   "--no-direct", ""});
  }
  if (!r.errors.empty()) {
    out.push_back({Severity::kWarning, "data.unreadable",
                   fmt::format("{} file(s) could not be read", r.errors.size()),
                   fmt::format("{}", fmt::join(r.errors, "; ")),
                   "check the dataset's permissions and the mount (training fails on them too)"});
  }
  if (!need) {
    out.push_back({Severity::kInfo, "data.read", fmt::format("reads at {:.0f} MB/s", got),
                   evidence + "; no need given (--samples-per-second and --sample-bytes)", ""});
    return out;
  }
  const double want = need->mb_per_second();
  evidence += fmt::format("; needed {:.1f} MB/s = {} samples/s x {} bytes x {} GPU(s)", want,
                          need->samples_per_second, need->sample_bytes, need->gpus);
  if (got >= want) {
    out.push_back({Severity::kInfo, "data.ok",
                   fmt::format("reads at {:.0f} MB/s, {:.1f}x the {:.1f} MB/s the GPUs consume",
                               got, want > 0 ? got / want : 0, want),
                   evidence, ""});
  } else {
    out.push_back(
        {got < want / 2 ? Severity::kError : Severity::kWarning, "data.too-slow",
         fmt::format("reads at {:.0f} MB/s, {:.0f}% of the {:.1f} MB/s the GPUs consume: they "
                     "will wait for data",
                     got, 100 * got / want, want),
         evidence,
         "stage the dataset on local NVMe (or cache it there after the first epoch), pack small "
         "samples into large shards (WebDataset, TFRecord) so reads are sequential, read with more "
         "parallelism (try --threads 32: if that is faster, use more DataLoader workers), or store "
         "it compressed and decode on the GPU"});
  }
  return out;
}

}  // namespace gpuorch::doctor

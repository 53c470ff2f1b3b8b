#include "gpuorch/launch/throughput_reporter.hpp"

#include <fmt/format.h>

#include <exception>
#include <filesystem>
#include <fstream>

#include "gpuorch/base/utc_time.hpp"

namespace gpuorch::launch {
namespace {

// A script that writes megabytes between two reads is read from its last 64 KiB: only the
// newest line matters.
constexpr std::uintmax_t kMostRead = 64 * 1024;

}  // namespace

ThroughputReporter::ThroughputReporter(std::string path, Publish publish, Log log,
                                       std::chrono::seconds interval)
    : path_(std::move(path)),
      publish_(std::move(publish)),
      log_(std::move(log)),
      interval_(interval) {}

void ThroughputReporter::new_round(int world_size, int nodes, bool first) {
  world_size_ = world_size;
  nodes_ = nodes;
  first_ = first;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path_, ec);
  offset_ = ec ? 0 : size;
  partial_.clear();
  latest_.reset();
  latest_published_ = false;
  warned_ = false;
  next_read_.reset();
}

void ThroughputReporter::read_new() {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path_, ec);
  if (ec) return;                                     // nothing written yet
  if (size < offset_) offset_ = 0, partial_.clear();  // truncated: read it again
  if (size == offset_) return;
  if (size - offset_ > kMostRead) {
    offset_ = size - kMostRead;
    partial_.clear();
  }
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk(static_cast<std::size_t>(size - offset_), '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  chunk.resize(static_cast<std::size_t>(in.gcount()));
  offset_ += chunk.size();
  partial_ += chunk;
  std::size_t start = 0;
  for (std::size_t end; (end = partial_.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string_view line(partial_.data() + start, end - start);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    std::string why;
    if (auto s = workload::parse_step_report(line, &why)) {
      if (!latest_ || *s != *latest_) latest_published_ = false;
      latest_ = s;
    } else if (!warned_) {
      warned_ = true;
      log_(fmt::format("throughput: a line of {} is not a step report ({}); ignored", path_, why));
    }
  }
  partial_.erase(0, start);
  if (partial_.size() > kMostRead) partial_.clear();  // no newline in sight: not a report
}

void ThroughputReporter::tick(Clock::time_point now, bool now_or_never) {
  if (!first_ || !publish_) return;
  if (now_or_never || !next_read_ || now >= *next_read_) {
    next_read_ = now + std::chrono::seconds(1);
    read_new();
  }
  if (!latest_ || latest_published_ || (next_publish_ && now < *next_publish_)) return;
  next_publish_ = now + interval_;
  const auto report =
      workload::throughput_at(*latest_, world_size_, nodes_, base::utc_now_rfc3339());
  try {
    publish_(report);
    latest_published_ = true;
    log_(fmt::format("throughput: {:.1f} samples/s at {} ranks on {} nodes published",
                     report.samples_per_second, report.world_size, report.nodes));
  } catch (const std::exception& e) {
    log_(fmt::format("throughput: publishing failed (tried again in {} s): {}", interval_.count(),
                     e.what()));
  }
}

}  // namespace gpuorch::launch

#include "cli/bench_print.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "gpuorch/base/error.hpp"
#include "gpuorch/comm/host_launch.hpp"

extern char** environ;

namespace gpuorch::cli {
namespace {

std::string local_time() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char buf[64] = {};
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

// nccl-tests never overwrites: FILE, else FILE.0, FILE.1, ...; nullptr when none can be created.
std::FILE* claim(const std::string& path, std::string& claimed) {
  for (int i = -1; i < 1000; ++i) {
    claimed = i < 0 ? path : fmt::format("{}.{}", path, i);
    const int fd = ::open(claimed.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) return ::fdopen(fd, "w");
    if (errno != EEXIST) break;
  }
  claimed = path;
  return nullptr;
}

}  // namespace

double min_bw_from_env() {
  const char* v = std::getenv("NCCL_TESTS_MIN_BW");
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const double bw = std::strtod(v, &end);
  if (*end != '\0' || !(bw >= 0)) {
    base::fail_input(fmt::format("NCCL_TESTS_MIN_BW={}: not a bandwidth in GB/s", v));
  }
  return bw;
}

BenchPrinter::BenchPrinter(const comm::Options& o, bool reporting, const std::string& json_file)
    : o_(o), out_(reporting) {
  run_.min_bw = min_bw_from_env();
  if (!out_ || json_file.empty()) return;
  std::string claimed;
  json_ = claim(json_file, claimed);
  const int error = errno;
  if (!o_.json && json_) fmt::print("# Writing JSON output to {}\n", claimed);
  if (!o_.json && !json_) fmt::print("# skipping json output; {} not accessible\n", claimed);
  if (!json_) {
    fmt::print(stderr, "gpuorch bench: -J {}: cannot create ({})\n", json_file,
               std::strerror(error));
  }
  run_.start_time = local_time();
  run_.args = comm::host::own_command_line();
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) run_.env.emplace_back(*e);
}

BenchPrinter::~BenchPrinter() {
  if (json_) std::fclose(json_);
}

void BenchPrinter::start(const comm::RunInfo& i) {
  info_ = i;
  if (out_ && !o_.json) fmt::print("{}{}", comm::header(o_, i), comm::table_header());
  std::fflush(stdout);
}

void BenchPrinter::row(const comm::Row& r) const {
  if (out_ && !o_.json) fmt::print("{}", comm::format_row(o_, r));
  std::fflush(stdout);
}

int BenchPrinter::finish(const std::vector<comm::Row>& rows) {
  if (out_ && o_.json) {
    fmt::print("{}\n", comm::to_json(o_, info_, rows).dump(2));
  } else if (out_) {
    fmt::print("{}", comm::footer(o_, rows, run_.min_bw));
  }
  if (json_) {
    run_.end_time = local_time();
    fmt::print(json_, "{}\n", comm::nccl_tests_json(o_, info_, rows, run_).dump());
    std::fclose(json_);
    json_ = nullptr;
  }
  std::fflush(stdout);
  return comm::failed_sizes(rows) > 0 || !comm::bandwidth_ok(rows, run_.min_bw) ? 1 : 0;
}

}  // namespace gpuorch::cli

// An NCCL_DEBUG=INFO job log as `gpuorch doctor nccl-log` reads it (doctor/nccl_log.hpp): the
// input parsed from memory (parse_nccl_log) and from a file (read_nccl_log, through
// base::LineReader, on a memfd), then its findings (check_nccl_log). Promise: the only exception
// is base::InputError (a log without one NCCL line, or a file the bounded reader refuses); both
// readings agree on the lines they count and on which of them are NCCL's; every line number a
// record carries is one of the log's lines.
#include "gpuorch/doctor/nccl_log.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "fuzz_support.hpp"
#include "gpuorch/doctor/nccl_log_check.hpp"

namespace {

namespace doctor = gpuorch::doctor;

void check(bool ok) {
  if (!ok) std::abort();
}

// The input as a regular file: one memfd for the whole run, rewritten for each input.
std::string as_file(const std::string& text) {
  static const int fd = memfd_create("nccl-log", 0);
  check(fd >= 0);
  check(ftruncate(fd, 0) == 0);
  check(pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()));
  return "/proc/self/fd/" + std::to_string(fd);
}

void check_lines(const doctor::NcclLog& log) {
  check(log.nccl_lines <= log.lines);
  for (const auto& c : log.connections) check(c.line >= 1 && c.line <= log.lines);
  for (const auto& w : log.warnings) check(w.line >= 1 && w.line <= log.lines);
  for (const auto& t : log.timeouts) check(t.line >= 1 && t.line <= log.lines);
  (void)doctor::check_nccl_log(log);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = gpuorch::fuzz::text_of(data, size);
  std::optional<doctor::NcclLog> from_text, from_file;
  gpuorch::fuzz::input_errors_only([&] { from_text = doctor::parse_nccl_log(text, "job.log"); });
  gpuorch::fuzz::input_errors_only([&] { from_file = doctor::read_nccl_log(as_file(text)); });
  if (from_text) check_lines(*from_text);
  if (from_file) check_lines(*from_file);
  check(from_text.has_value() == from_file.has_value());
  if (from_text && from_file) {
    check(from_text->lines == from_file->lines);
    check(from_text->nccl_lines == from_file->nccl_lines);
  }
  return 0;
}

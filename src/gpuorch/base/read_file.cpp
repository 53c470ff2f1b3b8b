#include "gpuorch/base/read_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpuorch/base/error.hpp"

namespace gpuorch::base {
namespace {

std::string not_regular(mode_t mode) {
  const char* kind = S_ISDIR(mode)    ? "a directory"
                     : S_ISFIFO(mode) ? "a FIFO"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                     : S_ISSOCK(mode) ? "a socket"
                                      : "not a file";
  return fmt::format("is {}, not a regular file", kind);
}

std::string too_large(std::size_t max_bytes) {
  return fmt::format("is larger than {} (the limit)", size_text(max_bytes));
}

// A descriptor of the regular file at `path`, or -1 with `problem` set.
int open_regular(const std::string& path, std::size_t max_bytes, std::string& problem) {
  // O_NONBLOCK: a FIFO without a writer opens at once instead of waiting for one; fstat then
  // refuses it like any other file that is not a regular one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  struct stat st {};
  if (fd < 0) {
    const int err = errno;
    // A socket cannot be opened at all (ENXIO): it is named like the others.
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      problem = not_regular(st.st_mode);
    } else {
      problem = fmt::format("cannot be opened: {}", std::strerror(err));
    }
    return -1;
  }
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    problem = not_regular(st.st_mode);
  } else if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    problem = too_large(max_bytes);  // at once; the reads below still count (procfs says 0)
  } else {
    return fd;
  }
  ::close(fd);
  return -1;
}

// Up to `size` bytes; 0 at the end; -1 with `problem` set on a read error.
ssize_t read_some(int fd, char* buffer, std::size_t size, std::string& problem) {
  for (;;) {
    const ssize_t got = ::read(fd, buffer, size);
    if (got >= 0) return got;
    if (errno == EINTR) continue;
    problem = fmt::format("cannot be read: {}", std::strerror(errno));
    return -1;
  }
}

}  // namespace

std::string size_text(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 30) && bytes % (std::size_t{1} << 30) == 0) {
    return fmt::format("{} GiB", bytes >> 30);
  }
  if (bytes >= (std::size_t{1} << 20) && bytes % (std::size_t{1} << 20) == 0) {
    return fmt::format("{} MiB", bytes >> 20);
  }
  return fmt::format("{} bytes", bytes);
}

std::optional<std::string> read_bounded(const std::string& path, std::size_t max_bytes,
                                        std::string& problem) {
  const int fd = open_regular(path, max_bytes, problem);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t got = read_some(fd, buffer, sizeof buffer, problem);
    if (got <= 0) {
      ::close(fd);
      if (got < 0) return std::nullopt;
      return out;
    }
    out.append(buffer, static_cast<std::size_t>(got));
    if (out.size() > max_bytes) {
      ::close(fd);
      problem = too_large(max_bytes);
      return std::nullopt;
    }
  }
}

std::string read_input_file(const std::string& path, const std::string& what,
                            std::size_t max_bytes) {
  std::string problem;
  auto text = read_bounded(path, max_bytes, problem);
  if (!text) fail_input(path, 0, fmt::format("the {} {}", what, problem));
  return std::move(*text);
}

LineReader::LineReader(std::string path, std::string what, std::size_t max_bytes,
                       std::size_t max_line, LongLines long_lines)
    : path_(std::move(path)),
      what_(std::move(what)),
      max_bytes_(max_bytes),
      max_line_(max_line),
      long_lines_(long_lines) {
  std::string problem;
  fd_ = open_regular(path_, max_bytes_, problem);
  if (fd_ < 0) fail(problem);
  buffer_.resize(64 * 1024);
}

LineReader::~LineReader() {
  if (fd_ >= 0) ::close(fd_);
}

void LineReader::fail(const std::string& problem) const {
  fail_input(path_, 0, fmt::format("the {} {}", what_, problem));
}

bool LineReader::fill() {
  if (eof_) return false;
  std::string problem;
  const ssize_t got = read_some(fd_, buffer_.data(), buffer_.size(), problem);
  if (got < 0) fail(problem);
  pos_ = 0;
  end_ = static_cast<std::size_t>(got);
  total_ += end_;
  if (total_ > max_bytes_) fail(too_large(max_bytes_));
  eof_ = got == 0;
  return !eof_;
}

bool LineReader::next(std::string& line) {
  for (;;) {
    line.clear();
    bool any = false;    // a byte or a line break seen: there is a line
    bool long_ = false;  // past max_line (+ 1 for a "\r" before the "\n"); no longer kept
    for (;;) {
      if (pos_ == end_ && !fill()) break;
      any = true;
      const char* start = buffer_.data() + pos_;
      const auto* nl = static_cast<const char*>(std::memchr(start, '\n', end_ - pos_));
      const std::size_t take = nl ? static_cast<std::size_t>(nl - start) : end_ - pos_;
      if (!long_ && line.size() + take > max_line_ + 1) {
        long_ = true;
        line.clear();
      }
      if (!long_) line.append(start, take);
      pos_ += take + (nl ? 1 : 0);
      if (nl) break;
    }
    if (!any) return false;
    ++line_no_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!long_ && line.size() <= max_line_) return true;
    if (long_lines_ == LongLines::kRefuse) {
      fail_input(path_, line_no_, fmt::format("line longer than {} bytes", max_line_));
    }
    ++skipped_;
  }
}

}  // namespace gpuorch::base

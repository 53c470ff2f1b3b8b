#include "gpuorch/launch/output.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <stdexcept>

namespace gpuorch::launch {
namespace {

void write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const auto w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
}

int open_log(const std::string& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644);
}

}  // namespace

struct OutputRelay::Stream {
  int read_fd = -1;
  int console_fd = 1;
  int log_fd = -1;
  std::string prefix;
  std::string partial;
  bool open = true;

  ~Stream() {
    if (read_fd >= 0) ::close(read_fd);
    if (log_fd >= 0) ::close(log_fd);
  }

  void emit(const char* data, std::size_t n, bool to_console) {
    if (log_fd >= 0) write_all(log_fd, data, n);
    if (!to_console) return;
    partial.append(data, n);
    std::size_t start = 0;
    for (auto nl = partial.find('\n'); nl != std::string::npos; nl = partial.find('\n', start)) {
      // One write per line keeps lines of different ranks from interleaving mid-line.
      const std::string line = prefix + partial.substr(start, nl - start + 1);
      write_all(console_fd, line.data(), line.size());
      start = nl + 1;
    }
    partial.erase(0, start);
  }

  void flush(bool to_console) {
    if (to_console && !partial.empty()) {
      const std::string line = prefix + partial + "\n";
      write_all(console_fd, line.data(), line.size());
    }
    partial.clear();
  }
};

OutputRelay::OutputRelay(bool to_console) : to_console_(to_console) {
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2 failed");
}

OutputRelay::~OutputRelay() {
  if (thread_.joinable()) finish(std::chrono::milliseconds(0));
  close_write_ends();
  for (const int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

OutputRelay::WorkerPipes OutputRelay::add_worker(int global_rank, const std::string& log_dir) {
  WorkerPipes w;
  for (const bool is_err : {false, true}) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    auto s = std::make_unique<Stream>();
    s->read_fd = p[0];
    s->console_fd = is_err ? STDERR_FILENO : STDOUT_FILENO;
    s->prefix = "[rank" + std::to_string(global_rank) + "]:";
    if (!log_dir.empty()) s->log_fd = open_log(log_dir + (is_err ? "/stderr.log" : "/stdout.log"));
    streams_.push_back(std::move(s));
    write_ends_.push_back(p[1]);
    (is_err ? w.stderr_write : w.stdout_write) = p[1];
  }
  return w;
}

void OutputRelay::close_write_ends() {
  for (const int fd : write_ends_) ::close(fd);
  write_ends_.clear();
}

void OutputRelay::start() {
  thread_ = std::thread([this] { run(); });
}

void OutputRelay::finish(std::chrono::milliseconds wait) {
  close_write_ends();
  if (!thread_.joinable()) return;
  deadline_ = std::chrono::steady_clock::now() + wait;
  std::atomic_thread_fence(std::memory_order_release);
  const char byte = 1;
  [[maybe_unused]] const auto n = ::write(wake_[1], &byte, 1);
  thread_.join();
  for (auto& s : streams_) s->flush(to_console_);
}

void OutputRelay::run() {
  std::vector<char> buffer(1 << 16);
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Stream*> owners;
    for (auto& s : streams_) {
      if (!s->open) continue;
      fds.push_back({s->read_fd, POLLIN, 0});
      owners.push_back(s.get());
    }
    if (fds.empty()) return;
    fds.push_back({wake_[0], POLLIN, 0});
    int timeout_ms = 200;
    if (stopping_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline_ - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return;
      timeout_ms = static_cast<int>(std::min<long long>(left, 200));
    }
    const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0 && errno != EINTR) return;
    if (fds.back().revents & POLLIN) {
      char drain[16];
      while (::read(wake_[0], drain, sizeof drain) > 0) {
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      stopping_ = true;
    }
    for (std::size_t i = 0; i + 1 < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const auto n = ::read(fds[i].fd, buffer.data(), buffer.size());
      if (n > 0) {
        owners[i]->emit(buffer.data(), static_cast<std::size_t>(n), to_console_);
      } else if (n == 0 || errno != EINTR) {
        owners[i]->open = false;
      }
    }
  }
}

}  // namespace gpuorch::launch

#include "gpuorch/launch/output.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <stdexcept>

#include "gpuorch/base/error.hpp"

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

std::optional<int> small_number(const std::string& s, int max) {
  if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const int v = std::stoi(s);
  if (v > max) return std::nullopt;
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const auto at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

constexpr int kMaxLocalRank = 99999;

}  // namespace

int StdSpec::at(int local_rank) const {
  if (all) return *all;
  const auto it = by_local_rank.find(local_rank);
  return it == by_local_rank.end() ? 0 : it->second;
}

StdSpec parse_std_spec(const std::string& flag, const std::string& text) {
  const auto bad = [&] {
    base::fail_input(flag + " " + text +
                     ": expected 0 (none), 1 (stdout), 2 (stderr), 3 (both), or "
                     "LOCAL_RANK:VALUE,... such as 0:1,1:2");
  };
  StdSpec spec;
  if (text.find(':') == std::string::npos) {
    const auto v = small_number(text, 3);
    if (!v) bad();
    spec.all = *v;
    return spec;
  }
  for (const auto& part : split(text, ',')) {
    const auto colon = part.find(':');
    if (colon == std::string::npos) bad();
    const auto rank = small_number(part.substr(0, colon), kMaxLocalRank);
    const auto v = small_number(part.substr(colon + 1), 3);
    if (!rank || !v) bad();
    spec.by_local_rank[*rank] = *v;
  }
  return spec;
}

std::vector<int> parse_local_ranks(const std::string& flag, const std::string& text) {
  std::vector<int> ranks;
  if (text.empty()) return ranks;
  for (const auto& part : split(text, ',')) {
    const auto rank = small_number(part, kMaxLocalRank);
    if (!rank) {
      base::fail_input(flag + " " + text + ": expected local ranks separated by commas (0,1,2)");
    }
    ranks.push_back(*rank);
  }
  return ranks;
}

std::string torchrun_line_prefix(const std::string& line_template, const std::string& role,
                                 int rank, int local_rank) {
  if (line_template.empty()) return "[" + role + std::to_string(local_rank) + "]:";
  const std::pair<std::string, std::string> fields[] = {{"role_name", role},
                                                        {"rank", std::to_string(rank)},
                                                        {"local_rank", std::to_string(local_rank)}};
  std::string out;
  for (std::size_t i = 0; i < line_template.size();) {
    bool replaced = false;
    for (const auto& [name, value] : fields) {
      for (const auto& form : {"${" + name + "}", "$" + name}) {
        // "$rank" must not match the start of "$rank_x"; "${rank}" is always whole.
        const bool whole =
            form[1] == '{' || i + form.size() >= line_template.size() ||
            !(std::isalnum(static_cast<unsigned char>(line_template[i + form.size()])) ||
              line_template[i + form.size()] == '_');
        if (line_template.compare(i, form.size(), form) == 0 && whole) {
          out += value;
          i += form.size();
          replaced = true;
          break;
        }
      }
      if (replaced) break;
    }
    if (!replaced) out += line_template[i++];
  }
  return out;
}

struct OutputRelay::Stream {
  int read_fd = -1;
  int console_fd = 1;
  int log_fd = -1;
  bool to_console = true;
  std::string prefix;
  std::string partial;
  bool open = true;

  ~Stream() {
    if (read_fd >= 0) ::close(read_fd);
    if (log_fd >= 0) ::close(log_fd);
  }

  void emit(const char* data, std::size_t n) {
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

  void flush() {
    if (to_console && !partial.empty()) {
      const std::string line = prefix + partial + "\n";
      write_all(console_fd, line.data(), line.size());
    }
    partial.clear();
  }
};

OutputRelay::OutputRelay() {
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2 failed");
}

OutputRelay::~OutputRelay() {
  if (thread_.joinable()) finish(std::chrono::milliseconds(0));
  close_write_ends();
  for (const int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

OutputRelay::WorkerPipes OutputRelay::add_worker(const std::string& log_dir, const StreamRoute& out,
                                                 const StreamRoute& err) {
  WorkerPipes w;
  for (const bool is_err : {false, true}) {
    const StreamRoute& route = is_err ? err : out;
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    auto s = std::make_unique<Stream>();
    s->read_fd = p[0];
    s->console_fd = is_err ? STDERR_FILENO : STDOUT_FILENO;
    s->to_console = route.console;
    s->prefix = route.prefix;
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
  for (auto& s : streams_) s->flush();
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
        owners[i]->emit(buffer.data(), static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        owners[i]->open = false;
      }
    }
  }
}

}  // namespace gpuorch::launch

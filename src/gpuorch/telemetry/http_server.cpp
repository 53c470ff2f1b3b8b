#include "gpuorch/telemetry/http_server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace gpuorch::telemetry {
namespace {

// httplib's TaskQueue (one task per accepted connection) over threads started on demand: a new
// one whenever every thread is busy, up to `max`; beyond that tasks wait for a free thread.
// Threads are kept once started (parked on a condition variable) and joined at shutdown.
class ElasticPool : public httplib::TaskQueue {
 public:
  explicit ElasticPool(std::size_t max) : max_(max < 1 ? 1 : max) {}
  ~ElasticPool() override { shutdown(); }
  ElasticPool(const ElasticPool&) = delete;
  ElasticPool& operator=(const ElasticPool&) = delete;

  void enqueue(std::function<void()> fn) override {
    const std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(fn));
    if (idle_ < tasks_.size() && threads_.size() < max_) {
      threads_.emplace_back([this] { work(); });
    }
    wake_.notify_one();
  }

  void shutdown() override {
    std::vector<std::thread> threads;
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
      threads.swap(threads_);
    }
    wake_.notify_all();
    for (auto& t : threads) t.join();
  }

 private:
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) return;  // stopping, and every accepted connection served
      auto fn = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  const std::size_t max_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace

int harden_and_bind(httplib::Server& server, const std::string& address, int port,
                    const HttpLimits& limits) {
  server.set_tcp_nodelay(true);
  const std::size_t max = limits.max_connections;
  server.new_task_queue = [max] { return new ElasticPool(max); };  // httplib owns it
  server.set_read_timeout(limits.read_timeout);
  server.set_write_timeout(limits.write_timeout);
  server.set_keep_alive_timeout(static_cast<time_t>(limits.keep_alive_timeout.count()));
  server.set_keep_alive_max_count(limits.keep_alive_max_count);
  server.set_payload_max_length(limits.max_payload);
  // httplib listens with a backlog of 5 and has no setting for it: note the socket it binds
  // (the last one it set options on), then listen again on it with ours, which Linux allows.
  auto fd = std::make_shared<socket_t>(INVALID_SOCKET);
  server.set_socket_options([fd](socket_t sock) {
    httplib::default_socket_options(sock);
    *fd = sock;
  });
  const int bound = port == 0 ? server.bind_to_any_port(address)
                              : (server.bind_to_port(address, port) ? port : -1);
  if (bound >= 0 && *fd != INVALID_SOCKET) ::listen(*fd, limits.backlog);
  return bound;
}

std::string host_port(const std::string& address, int port) {
  if (address.find(':') != std::string::npos) return fmt::format("[{}]:{}", address, port);
  return fmt::format("{}:{}", address, port);
}

std::string listen_scope(const std::string& address) {
  if (address == "0.0.0.0") return "every IPv4 interface";
  if (address == "::") return "every interface";
  if (address == "::1" || address == "localhost" || address.rfind("127.", 0) == 0) {
    return "loopback only";
  }
  return "this address only";
}

}  // namespace gpuorch::telemetry

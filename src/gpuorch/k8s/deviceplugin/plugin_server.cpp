#include "gpuorch/k8s/deviceplugin/plugin_server.hpp"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "gpuorch/base/error.hpp"
#include "gpuorch/k8s/deviceplugin/allocate.hpp"
#include "gpuorch/k8s/deviceplugin/preferred.hpp"
#include "gpuorch/k8s/deviceplugin/wire.hpp"
#include "gpuorch/k8s/kubelet/private_socket.hpp"

namespace gpuorch::k8s {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// One resource's DevicePlugin service. A new one is made for every (re)start, so a stream of a
// kubelet that went away never sees the next kubelet's state.
class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  DevicePluginService(const topology::Host& host, const PluginConfig& config, const Resource& r,
                      HealthState& health, std::string directory, ScheduledAllocations* scheduled)
      : host_(host),
        config_(config),
        r_(r),
        health_(health),
        dir_(std::move(directory)),
        scheduled_(scheduled) {}

  // Streams notice within one wait (200 ms) and return, so the server can shut down.
  void stop() { stopping_ = true; }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    out->set_pre_start_required(false);
    out->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    std::uint64_t sent = 0;
    while (!stopping_ && !health_.stopping() && !ctx->IsCancelled()) {
      const std::uint64_t version = health_.version();
      if (version != sent) {
        if (!writer->Write(device_list(host_, r_, health_))) break;
        sent = version;
      }
      // Short waits: a cancelled stream (kubelet gone) is noticed within a fraction of a second.
      health_.wait_change(sent, 200ms);
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override {
    try {
      for (const auto& c : req->container_requests()) {
        const std::vector<std::string> avail(c.available_deviceids().begin(),
                                             c.available_deviceids().end());
        const std::vector<std::string> must(c.must_include_deviceids().begin(),
                                            c.must_include_deviceids().end());
        auto* resp = out->add_container_responses();
        // A pod a gpuorch scheduler placed here waits for these GPUs: prefer exactly them, so
        // the kubelet's own accounting names the devices the pod will get.
        std::optional<std::vector<std::string>> recorded;
        if (scheduled_ != nullptr && must.empty()) {
          recorded = scheduled_->preferred(r_, avail, c.allocation_size());
        }
        for (const auto& id :
             recorded ? *recorded
                      : preferred_allocation(host_, r_, avail, must, c.allocation_size())) {
          resp->add_deviceids(id);
        }
      }
    } catch (const std::exception& e) {
      return {grpc::StatusCode::INVALID_ARGUMENT, e.what()};
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override {
    try {
      for (const auto& c : req->container_requests()) {
        const std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
        AllocateOptions o;
        o.config = &config_;
        o.device_plugin_dir = dir_;
        o.response_id = fmt::format("{}", ++responses_);
        const std::optional<ScheduledChoice> choice =
            scheduled_ != nullptr ? scheduled_->claim(r_, ids) : std::nullopt;
        ContainerAllocation a = allocate(host_, r_, choice ? choice->device_ids : ids, o);
        if (choice) apply_scheduled_share(host_, r_, *choice, a);
        to_proto(a, *out->add_container_responses());
      }
    } catch (const std::exception& e) {
      return {grpc::StatusCode::INVALID_ARGUMENT, e.what()};
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  const topology::Host& host_;
  const PluginConfig& config_;
  const Resource& r_;
  HealthState& health_;
  std::string dir_;
  ScheduledAllocations* scheduled_;
  std::atomic<bool> stopping_{false};
  std::atomic<long> responses_{0};
};

struct Endpoint {
  const Resource* resource = nullptr;
  std::unique_ptr<DevicePluginService> service;
  std::unique_ptr<grpc::Server> server;
  bool registered = false;
  std::string path;
};

}  // namespace

struct PluginManager::Impl {
  topology::Host host;
  PluginConfig config;
  std::vector<Resource> resources;
  PluginOptions options;
  HealthState health;
  std::vector<Endpoint> endpoints;
  int stop_fd = -1;
  int reload_fd = -1;
  std::atomic<int> registrations{0};

  Impl(topology::Host h, PluginConfig c, std::vector<Resource> r, PluginOptions o)
      : host(std::move(h)),
        config(std::move(c)),
        resources(std::move(r)),
        options(std::move(o)),
        health([this](const std::string& line) { log(line); }) {}

  void log(const std::string& line) const {
    if (options.log) {
      options.log(line);
    } else {
      fmt::print(stderr, "gpuorch device-plugin: {}\n", line);
    }
  }
  std::string kubelet_path() const {
    return (fs::path(options.directory) / options.kubelet_socket).string();
  }

  void make_endpoints() {
    endpoints.clear();
    endpoints.reserve(resources.size());
    for (const auto& r : resources) endpoints.push_back(Endpoint{&r, nullptr, nullptr, false, {}});
  }

  // SIGHUP: the new plan replaces the running one only when there is one; the streams of the old
  // endpoints end, and the kubelet gets the new resources by registration, as after its restart.
  bool reload_plan() {
    if (!options.reload) {
      log("SIGHUP: nothing to reload");
      return true;
    }
    std::optional<PluginPlan> plan = options.reload();
    if (!plan) {
      log("SIGHUP: keeping the running config");
      return true;
    }
    for (auto& e : endpoints) stop_endpoint(e);
    config = std::move(plan->config);
    resources = std::move(plan->resources);
    make_endpoints();
    std::string what;
    for (const auto& r : resources) {
      what += fmt::format("{}{} ({} devices)", what.empty() ? "" : ", ", r.name, r.devices.size());
    }
    log(fmt::format("SIGHUP: reloaded {}: {}", config.source,
                    what.empty() ? "no resources" : what));
    bool ok = true;
    for (auto& e : endpoints) ok = serve(e) && ok;
    return ok;
  }

  bool serve(Endpoint& e) {
    e.path = (fs::path(options.directory) / e.resource->socket_name()).string();
    e.service = std::make_unique<DevicePluginService>(host, config, *e.resource, health,
                                                      options.directory, options.scheduled);
    grpc::ServerBuilder b;
    b.RegisterService(e.service.get());
    std::string error;
    e.server = start_private_server(b, e.path, error);
    if (!e.server) {
      log(fmt::format("cannot serve {}: {}", e.resource->name, error));
      e.service.reset();
      return false;
    }
    e.registered = false;
    log(fmt::format("serving {} ({} device{}) on {}", e.resource->name, e.resource->devices.size(),
                    e.resource->devices.size() == 1 ? "" : "s", e.path));
    return true;
  }

  void stop_endpoint(Endpoint& e) {
    if (e.service) e.service->stop();
    if (e.server) {
      e.server->Shutdown(std::chrono::system_clock::now() + 1s);
      e.server->Wait();
      e.server.reset();
    }
    e.service.reset();
    std::error_code ec;
    if (!e.path.empty()) fs::remove(e.path, ec);
    e.registered = false;
  }

  // One Register call; false (with the reason logged by the caller) when the kubelet refused or
  // is not there.
  bool register_endpoint(Endpoint& e, std::string& why) {
    auto channel =
        grpc::CreateChannel("unix:" + kubelet_path(), grpc::InsecureChannelCredentials());
    auto stub = v1beta1::Registration::NewStub(channel);
    v1beta1::RegisterRequest req;
    req.set_version("v1beta1");
    req.set_endpoint(e.resource->socket_name());
    req.set_resource_name(e.resource->name);
    req.mutable_options()->set_pre_start_required(false);
    req.mutable_options()->set_get_preferred_allocation_available(true);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options.register_timeout);
    v1beta1::Empty reply;
    const grpc::Status s = stub->Register(&ctx, req, &reply);
    if (!s.ok()) {
      why = fmt::format("{}: {}", static_cast<int>(s.error_code()), s.error_message());
      return false;
    }
    e.registered = true;
    ++registrations;
    log(fmt::format("registered {} with the kubelet ({})", e.resource->name, kubelet_path()));
    return true;
  }
};

PluginManager::PluginManager(topology::Host host, PluginConfig config,
                             std::vector<Resource> resources, PluginOptions options)
    : impl_(std::make_unique<Impl>(std::move(host), std::move(config), std::move(resources),
                                   std::move(options))) {
  const auto& dir = impl_->options.directory;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    base::fail_input(fmt::format("{}: the device plugin directory does not exist", dir));
  }
  if (!fs::is_directory(dir, ec)) {
    base::fail_input(fmt::format("{}: the device plugin directory is not a directory", dir));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    base::fail_input(fmt::format("{}: the device plugin directory is not writable", dir));
  }
  impl_->stop_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  impl_->reload_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

PluginManager::~PluginManager() {
  for (auto& e : impl_->endpoints) impl_->stop_endpoint(e);
  if (impl_->stop_fd >= 0) ::close(impl_->stop_fd);
  if (impl_->reload_fd >= 0) ::close(impl_->reload_fd);
}

HealthState& PluginManager::health() { return impl_->health; }
const std::vector<Resource>& PluginManager::resources() const { return impl_->resources; }
int PluginManager::registrations() const { return impl_->registrations; }

void PluginManager::stop() {
  const std::uint64_t one = 1;
  // write(2) is async-signal-safe; nothing else happens here.
  [[maybe_unused]] const auto n = ::write(impl_->stop_fd, &one, sizeof one);
}

void PluginManager::reload() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(impl_->reload_fd, &one, sizeof one);
}

int PluginManager::run() {
  Impl& m = *impl_;
  const bool registering = !m.options.kubelet_socket.empty();
  const fs::path kubelet = m.kubelet_path();
  const std::string kubelet_name = kubelet.filename().string();
  const int ino = registering ? ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK) : -1;
  if (registering && (ino < 0 || ::inotify_add_watch(ino, kubelet.parent_path().c_str(),
                                                     IN_CREATE | IN_MOVED_TO) < 0)) {
    m.log(fmt::format("cannot watch {} with inotify: kubelet restarts will not be seen",
                      kubelet.parent_path().string()));
  }
  if (!registering) m.log("no kubelet socket: serving without registering");
  m.make_endpoints();
  int rc = 0;
  for (auto& e : m.endpoints) {
    if (!m.serve(e)) rc = 1;
  }
  auto backoff = m.options.backoff_initial;
  auto next_try = std::chrono::steady_clock::now();
  bool waiting_logged = false;
  while (rc == 0) {
    // Register whatever is not registered yet, when its time has come.
    if (std::chrono::steady_clock::now() >= next_try) {
      bool all = true;
      for (auto& e : m.endpoints) {
        std::string why;
        if (registering && !e.registered && !m.register_endpoint(e, why)) {
          all = false;
          m.log(fmt::format("kubelet not reachable at {} ({}): retrying {} in {} ms",
                            m.kubelet_path(), why, e.resource->name, backoff.count()));
          waiting_logged = true;
          break;
        }
      }
      if (all) {
        backoff = m.options.backoff_initial;
        next_try = std::chrono::steady_clock::time_point::max();
        if (waiting_logged) waiting_logged = false;
      } else {
        next_try = std::chrono::steady_clock::now() + backoff;
        backoff = std::min(backoff * 2, m.options.backoff_max);
      }
    }
    const auto now = std::chrono::steady_clock::now();
    int timeout_ms = -1;
    if (next_try != std::chrono::steady_clock::time_point::max()) {
      timeout_ms = static_cast<int>(std::max<long long>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(next_try - now).count()));
    }
    pollfd fds[3] = {{m.stop_fd, POLLIN, 0}, {m.reload_fd, POLLIN, 0}, {ino, POLLIN, 0}};
    const int n = ::poll(fds, ino >= 0 ? 3 : 2, timeout_ms);
    if (n < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) break;
    if (fds[1].revents & POLLIN) {
      std::uint64_t count = 0;
      [[maybe_unused]] const auto got = ::read(m.reload_fd, &count, sizeof count);
      if (!m.reload_plan()) rc = 1;
      backoff = m.options.backoff_initial;
      next_try = std::chrono::steady_clock::now();
    }
    if (ino >= 0 && (fds[2].revents & POLLIN)) {
      alignas(inotify_event) char buf[4096];
      bool kubelet_created = false;
      for (;;) {
        const ssize_t len = ::read(ino, buf, sizeof buf);
        if (len <= 0) break;
        for (ssize_t off = 0; off < len;) {
          const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
          if (ev->len > 0 && kubelet_name == ev->name) kubelet_created = true;
          off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        }
      }
      if (kubelet_created) {
        // A new kubelet deletes every socket in the directory when it starts, ours included.
        m.log(
            fmt::format("inotify: {} created, serving again and re-registering", m.kubelet_path()));
        for (auto& e : m.endpoints) {
          m.stop_endpoint(e);
          if (!m.serve(e)) rc = 1;
        }
        backoff = m.options.backoff_initial;
        next_try = std::chrono::steady_clock::now();
      }
    }
  }
  m.log("stopping: ending streams, removing sockets");
  m.health.stop();
  for (auto& e : m.endpoints) m.stop_endpoint(e);
  if (ino >= 0) ::close(ino);
  return rc;
}

}  // namespace gpuorch::k8s

// One or several processes driving GPUs through NCCL; the timing and checking loop of nccl-tests.
#include "gpuorch/comm/gpu_backend.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "gpuorch/base/error.hpp"
#include "gpuorch/comm/check_pattern.hpp"
#include "gpuorch/comm/deadline.hpp"
#include "gpuorch/comm/expected.hpp"
#include "gpuorch/comm/gpu_libs.hpp"
#include "gpuorch/comm/launch_env.hpp"
#include "gpuorch/comm/peer_group.hpp"

namespace gpuorch::comm {
namespace {

using namespace gpu;

// Fill and check move data in tiles of whole pattern periods (about 8.6 M elements).
constexpr std::size_t kTile = kPatternPeriod << 18;

struct Rank {
  int global = 0;  // rank in the communicator
  CuDevice device = 0;
  CuContext context = nullptr;
  CuStream stream = nullptr;
  NcclComm comm = nullptr;
  CuDevicePtr send = 0, recv = 0;
  void* host = nullptr;  // pinned staging for the check, kTile elements
};

// Owns the devices' streams, buffers and communicators; releases them in any case.
class Session {
 public:
  Session(const Cuda& cuda, const Nccl& nccl, int n)
      : cuda_(cuda), nccl_(nccl), ranks_(static_cast<std::size_t>(n)) {}
  ~Session() {
    for (auto& r : ranks_) {
      if (r.comm) (failed_ ? nccl_.comm_abort : nccl_.comm_destroy)(r.comm);
    }
    for (auto& r : ranks_) {
      if (!r.context) continue;
      cuda_.ctx_set_current(r.context);
      if (r.send) cuda_.mem_free(r.send);
      if (r.recv) cuda_.mem_free(r.recv);
      if (r.host) cuda_.host_free(r.host);
      if (r.stream) cuda_.stream_destroy(r.stream);
      cuda_.primary_release(r.device);
    }
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  std::vector<Rank>& ranks() { return ranks_; }
  void failed() { failed_ = true; }

 private:
  const Cuda& cuda_;
  const Nccl& nccl_;
  std::vector<Rank> ranks_;
  bool failed_ = false;
};

// The devices of this process: -g of them from LOCAL_RANK x -g, or the first -g when the launcher
// already narrowed CUDA_VISIBLE_DEVICES to this process's share.
int first_device(const Options& o, const std::optional<LaunchEnv>& launch, int present) {
  if (!launch || launch->world == 1) {
    if (o.gpus > present) {
      throw EnvironmentError(
          fmt::format("-g {}: only {} GPU{} present", o.gpus, present, present == 1 ? "" : "s"));
    }
    return 0;
  }
  const int first = launch->local_rank * o.gpus;
  if (first + o.gpus <= present) return first;
  if (o.gpus <= present && present < 2 * o.gpus) return 0;  // CUDA_VISIBLE_DEVICES per process
  throw EnvironmentError(fmt::format("-g {} with LOCAL_RANK {} needs GPUs {}..{}, only {} present",
                                     o.gpus, launch->local_rank, first, first + o.gpus - 1,
                                     present));
}

class Runner {
 public:
  Runner(const Options& o, const Cuda& cuda, const Nccl& nccl, std::vector<Rank>& ranks, int nranks,
         PeerWatchdog* watchdog)
      : o_(o), cuda_(cuda), nccl_(nccl), ranks_(ranks), n_(nranks), watchdog_(watchdog) {}

  // Launches the collective once on every local rank inside one NCCL group.
  void launch(std::size_t count, bool in_place) {
    const ElementCounts c = element_counts(o_.collective, count, n_);
    const std::size_t ws = o_.type.bytes;
    const int dt = o_.type.nccl;
    nccl_.check(nccl_.group_start(), "group start");
    NcclResult res = 0;
    for (Rank& k : ranks_) {
      const auto g = static_cast<std::size_t>(k.global);
      auto* recv = reinterpret_cast<void*>(k.recv);
      const void* send = reinterpret_cast<const void*>(k.send);
      if (in_place) {
        send = recv;
        if (o_.collective == Collective::all_gather) {
          send = reinterpret_cast<const void*>(k.recv + g * c.send * ws);
        }
        if (o_.collective == Collective::reduce_scatter) {
          // In place: the full array lives in send, the result in its own chunk of it.
          send = reinterpret_cast<const void*>(k.send);
          recv = reinterpret_cast<void*>(k.send + g * c.recv * ws);
        }
      }
      switch (o_.collective) {
        case Collective::all_reduce:
          res = nccl_.all_reduce(send, recv, count, dt, o_.op.nccl, k.comm, k.stream);
          break;
        case Collective::all_gather:
          res = nccl_.all_gather(send, recv, count, dt, k.comm, k.stream);
          break;
        case Collective::reduce_scatter:
          res = nccl_.reduce_scatter(send, recv, count, dt, o_.op.nccl, k.comm, k.stream);
          break;
        case Collective::broadcast:
          res = nccl_.broadcast(send, recv, count, dt, o_.root, k.comm, k.stream);
          break;
        case Collective::reduce:
          res = nccl_.reduce(send, recv, count, dt, o_.op.nccl, o_.root, k.comm, k.stream);
          break;
        case Collective::alltoall:  // grouped send/recv to every peer, as nccl-tests
          // In place (timed only, as nccl-tests) sends from and receives into one buffer.
          for (int p = 0; p < n_ && res == 0; ++p) {
            const auto off = static_cast<std::size_t>(p) * count * ws;
            res = nccl_.send(static_cast<const char*>(send) + off, count, dt, p, k.comm, k.stream);
            if (res == 0) {
              res = nccl_.recv(static_cast<char*>(recv) + off, count, dt, p, k.comm, k.stream);
            }
          }
          break;
        case Collective::sendrecv:
          res = nccl_.send(send, count, dt, (k.global + 1) % n_, k.comm, k.stream);
          if (res == 0) {
            res = nccl_.recv(recv, count, dt, (k.global - 1 + n_) % n_, k.comm, k.stream);
          }
          break;
      }
      if (res != 0) break;
    }
    const NcclResult end = nccl_.group_end();
    nccl_.check(res, "collective");
    nccl_.check(end, "group end");
  }

  void sync() {
    for (auto& k : ranks_) {
      cuda_.check(cuda_.ctx_set_current(k.context), "set context");
      cuda_.check(cuda_.stream_sync(k.stream), "stream synchronize");
    }
    if (watchdog_) watchdog_->beat();
  }

  double time(std::size_t count, bool in_place) {
    for (int i = 0; i < o_.warmup; ++i) {
      launch(count, in_place);
      if (o_.blocking) sync();
    }
    sync();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) {
      // -m: the iteration's ops in one NCCL group, as nccl-tests aggregates them.
      if (o_.agg_iters > 1) nccl_.check(nccl_.group_start(), "group start");
      for (int a = 0; a < o_.agg_iters; ++a) launch(count, in_place);
      if (o_.agg_iters > 1) nccl_.check(nccl_.group_end(), "group end");
      if (o_.blocking == 1 || o_.blocking == 2) sync();
    }
    sync();
    const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start;
    return d.count() / (static_cast<double>(o_.iters) * o_.agg_iters);
  }

  // Fills the inputs with the reference pattern, runs once, counts wrong elements on the host.
  long long check(std::size_t count, bool in_place) {
    long long wrong = 0;
    for (int iter = 0; iter < o_.check; ++iter) {
      for_each_rank([&](Rank& k) { prepare(k, count, in_place); });
      launch(count, in_place);
      sync();
      std::vector<long long> per(ranks_.size(), 0);
      for_each_rank([&](Rank& k) { per[index(k)] = verify(k, count, in_place); });
      for (const long long w : per) wrong += w;
    }
    return wrong;
  }

 private:
  std::size_t index(const Rank& k) const { return static_cast<std::size_t>(&k - ranks_.data()); }

  // One thread per local GPU: fill and verify move gigabytes per rank.
  template <typename F>
  void for_each_rank(F f) {
    std::vector<std::future<void>> work;
    for (Rank& k : ranks_) {
      work.push_back(std::async(std::launch::async, [&, kp = &k] {
        cuda_.check(cuda_.ctx_set_current(kp->context), "set context");
        f(*kp);
      }));
    }
    for (auto& w : work) w.get();
  }

  // The input where launch() reads it: recv (in place) or send; out-of-place outputs poisoned so a
  // collective that writes nothing is caught.
  void prepare(Rank& k, std::size_t count, bool in_place) {
    const ElementCounts c = element_counts(o_.collective, count, n_);
    const std::size_t ws = o_.type.bytes;
    CuDevicePtr in = k.send;
    if (in_place && o_.collective != Collective::reduce_scatter) {
      in = k.recv;
      if (o_.collective == Collective::all_gather) {
        in = k.recv + static_cast<std::size_t>(k.global) * c.send * ws;
      }
    }
    fill(k, in, c.send);
    if (!in_place && c.recv > 0) cuda_.check(cuda_.memset_d8(k.recv, 0xA5, c.recv * ws), "memset");
    // Copies and memsets run on the legacy stream; the NCCL streams do not wait for it.
    cuda_.check(cuda_.ctx_synchronize(), "synchronize");
  }

  // input_value(rank, i), i < n, at dst: one tile from the host, then doubling copies on the
  // device (the pattern repeats every kPatternPeriod elements, every copy keeps the phase).
  void fill(const Rank& k, CuDevicePtr dst, std::size_t n) {
    if (n == 0) return;
    const std::size_t ws = o_.type.bytes;
    const std::size_t first = std::min(n, kTile);
    const auto tile = encode_values(o_, n_, k.global, 0, first);
    cuda_.check(cuda_.htod(dst, tile.data(), tile.size()), "copy to device");
    for (std::size_t have = first; have < n;) {
      const std::size_t len = std::min(have, n - have);
      cuda_.check(cuda_.dtod(dst + have * ws, dst, len * ws), "copy on device");
      have += len;
    }
  }

  long long verify(Rank& k, std::size_t count, bool in_place) {
    const ElementCounts c = element_counts(o_.collective, count, n_);
    const std::size_t ws = o_.type.bytes;
    CuDevicePtr out = k.recv;
    if (in_place && o_.collective == Collective::reduce_scatter) {
      out = k.send + static_cast<std::size_t>(k.global) * c.recv * ws;
    }
    long long wrong = 0;
    auto* host = static_cast<unsigned char*>(k.host);
    for (const Segment& s : expected_output(o_, n_, k.global, count)) {
      const auto tile = encode_values(o_, n_, s.source_rank, s.first, std::min(s.length, kTile));
      for (std::size_t off = 0; off < s.length; off += kTile) {
        const std::size_t len = std::min(kTile, s.length - off);
        cuda_.check(cuda_.dtoh(host, out + (s.out_begin + off) * ws, len * ws), "copy to host");
        if (std::memcmp(host, tile.data(), len * ws) == 0) continue;
        for (std::size_t i = 0; i < len; ++i) {
          if (std::memcmp(host + i * ws, tile.data() + i * ws, ws) != 0) ++wrong;
        }
      }
    }
    return wrong;
  }

  const Options& o_;
  const Cuda& cuda_;
  const Nccl& nccl_;
  std::vector<Rank>& ranks_;
  int n_;
  PeerWatchdog* watchdog_;
};

std::string device_line(const Cuda& cuda, const Rank& k, int ordinal) {
  char name[256] = {};
  cuda.device_name(name, sizeof name, k.device);
  int domain = 0, bus = 0, dev = 0;
  cuda.device_attribute(&domain, kCuDevAttrPciDomain, k.device);
  cuda.device_attribute(&bus, kCuDevAttrPciBus, k.device);
  cuda.device_attribute(&dev, kCuDevAttrPciDevice, k.device);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return fmt::format("Pid {:6} on {:>10} device {:2} [{:04x}:{:02x}:{:02x}] {}", ::getpid(), host,
                     ordinal, domain, bus, dev, name);
}

// Contexts, streams and buffers for this process's GPUs, sized for the largest point.
void open_devices(const Options& o, const Cuda& cuda, std::vector<Rank>& ranks, int first_dev,
                  int first_global, int nranks) {
  std::size_t max_send = 0, max_recv = 0;
  for (const auto& p : size_sweep(o, nranks)) {
    const ElementCounts c = element_counts(o.collective, p.count, nranks);
    max_send = std::max(max_send, c.send * o.type.bytes);
    max_recv = std::max(max_recv, c.recv * o.type.bytes);
  }
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    Rank& k = ranks[i];
    k.global = first_global + static_cast<int>(i);
    cuda.check(cuda.device_get(&k.device, first_dev + static_cast<int>(i)), "device get");
    cuda.check(cuda.primary_retain(&k.context, k.device), "primary context");
    cuda.check(cuda.ctx_set_current(k.context), "set context");
    cuda.check(cuda.stream_create(&k.stream, kCuStreamNonBlocking), "stream create");
    cuda.check(cuda.mem_alloc(&k.send, std::max<std::size_t>(max_send, 1)), "allocate send buffer");
    cuda.check(cuda.mem_alloc(&k.recv, std::max<std::size_t>(max_recv, 1)),
               "allocate receive buffer");
    if (o.check > 0) {
      cuda.check(cuda.host_alloc(&k.host, kTile * o.type.bytes, 0), "allocate pinned memory");
    }
  }
}

// -a: every process's times reduced as nccl-tests does: 0 rank 0's, 1 the mean, 2 min, 3 max.
std::vector<double> across_processes(int average, PeerGroup& group,
                                     const std::vector<double>& mine) {
  if (average == 1) {
    auto s = group.sum(mine);
    for (double& v : s) v /= group.world();
    return s;
  }
  std::string bytes(mine.size() * sizeof(double), '\0');
  std::memcpy(bytes.data(), mine.data(), bytes.size());
  const auto all = group.all_gather(bytes);
  std::vector<double> out(mine.size());
  for (std::size_t p = 0; p < all.size(); ++p) {
    if (all[p].size() != bytes.size()) throw PeerError("a peer sent malformed times");
    std::vector<double> theirs(mine.size());
    std::memcpy(theirs.data(), all[p].data(), all[p].size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (p == 0) {
        out[i] = theirs[i];  // -a 0 keeps rank 0's
      } else if (average == 2) {
        out[i] = std::min(out[i], theirs[i]);
      } else if (average == 3) {
        out[i] = std::max(out[i], theirs[i]);
      }
    }
  }
  return out;
}

std::vector<Row> sweep(const Options& o, Runner& runner, int nranks, PeerGroup* group,
                       PeerWatchdog* watchdog, Deadline* deadline,
                       const std::function<void(const Row&)>& on_row) {
  std::vector<Row> rows;
  for (const auto& p : size_sweep(o, nranks)) {
    const std::string what = fmt::format("{} at {} B", collective_name(o.collective), p.bytes);
    if (watchdog) watchdog->arm(what);
    if (deadline) deadline->arm(what);
    double t_out = runner.time(p.count, false);
    double w_out = o.check > 0 ? static_cast<double>(runner.check(p.count, false)) : -1;
    double t_in = runner.time(p.count, true);
    const bool check_in = o.check > 0 && checks_in_place(o.collective);
    double w_in = check_in ? static_cast<double>(runner.check(p.count, true)) : -1;
    if (watchdog) watchdog->disarm();
    if (deadline) deadline->disarm();
    if (group) {
      // nccl-tests under MPI: time per -a over processes, #wrong = sum over ranks.
      const auto s = group->sum({w_out, w_in});
      if (o.check > 0) w_out = s[0];
      if (check_in) w_in = s[1];
      const auto t = across_processes(o.average, *group, {t_out, t_in});
      t_out = t[0];
      t_in = t[1];
    }
    Row row;
    row.size = p;
    row.out_of_place = make_timing(o.collective, nranks, p.bytes, t_out,
                                   static_cast<long long>(std::llround(w_out)));
    row.in_place = make_timing(o.collective, nranks, p.bytes, t_in,
                               static_cast<long long>(std::llround(w_in)));
    on_row(row);
    rows.push_back(row);
  }
  return rows;
}

std::vector<Row> run_single(const Options& o, const std::function<void(const RunInfo&)>& on_start,
                            const std::function<void(const Row&)>& on_row) {
  const Cuda cuda;
  const Nccl nccl(o.nccl_library);
  cuda.check(cuda.init(0), "init");
  int present = 0;
  cuda.check(cuda.device_count(&present), "device count");
  first_device(o, std::nullopt, present);
  RunInfo info;
  info.nranks = o.gpus;
  info.library = nccl.version();
  info.nccl_version = nccl.version_code();
  Session session(cuda, nccl, o.gpus);
  auto& ranks = session.ranks();
  open_devices(o, cuda, ranks, 0, 0, o.gpus);
  std::vector<int> devlist;
  for (int r = 0; r < o.gpus; ++r) {
    info.devices.push_back(device_line(cuda, ranks[static_cast<std::size_t>(r)], r));
    devlist.push_back(r);
  }
  std::vector<NcclComm> comms(ranks.size(), nullptr);
  nccl.check(nccl.comm_init_all(comms.data(), o.gpus, devlist.data()), "comm init");
  for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r].comm = comms[r];
  on_start(info);
  Runner runner(o, cuda, nccl, ranks, o.gpus, nullptr);
  std::optional<Deadline> deadline;
  if (o.timeout_s > 0) deadline.emplace(o.timeout_s);
  return sweep(o, runner, o.gpus, nullptr, nullptr, deadline ? &*deadline : nullptr, on_row);
}

std::vector<Row> run_multi(const Options& o, const LaunchEnv& launch,
                           const std::function<void(const RunInfo&)>& on_start,
                           const std::function<void(const Row&)>& on_row) {
  // -T, else GPUORCH_PEER_TIMEOUT (default 300 s): every wait on a peer and on the GPUs.
  const double limit_s = o.timeout_s > 0 ? o.timeout_s : peer_timeout_s();
  const auto timeout = std::chrono::milliseconds(std::llround(limit_s * 1000));
  std::optional<PeerGroup> group;
  try {
    group.emplace(launch.rank, launch.world, launch.master_addr, launch.port, timeout);
  } catch (const PeerError& e) {
    throw EnvironmentError(
        fmt::format("rank {} of {} ({}): {}", launch.rank, launch.world, launch.source, e.what()));
  }
  const int nranks = launch.world * o.gpus;
  try {
    // Every process finds out whether it can run before any of them starts NCCL, so that all
    // fail with the same line instead of waiting for one that already left.
    std::optional<Cuda> cuda;
    std::optional<Nccl> nccl;
    int first_dev = 0;
    std::string problem, library;
    int version_code = 0;
    try {
      cuda.emplace();
      nccl.emplace(o.nccl_library);
      cuda->check(cuda->init(0), "init");
      int present = 0;
      cuda->check(cuda->device_count(&present), "device count");
      first_dev = first_device(o, launch, present);
      library = nccl->version();
      version_code = nccl->version_code();
    } catch (const EnvironmentError& e) {
      problem = e.what();
    }
    const auto problems = group->all_gather(problem);
    for (std::size_t r = 0; r < problems.size(); ++r) {
      if (!problems[r].empty()) throw EnvironmentError(fmt::format("rank {}: {}", r, problems[r]));
    }
    Session session(*cuda, *nccl, o.gpus);
    auto& ranks = session.ranks();
    open_devices(o, *cuda, ranks, first_dev, launch.rank * o.gpus, nranks);
    std::string mine;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      mine += fmt::format("{}\n", device_line(*cuda, ranks[i], first_dev + static_cast<int>(i)));
    }
    RunInfo info;
    info.nranks = nranks;
    info.library = library;
    info.nccl_version = version_code;
    for (const auto& part : group->all_gather(mine)) {
      for (std::size_t at = 0, nl; (nl = part.find('\n', at)) != std::string::npos; at = nl + 1) {
        info.devices.push_back(part.substr(at, nl - at));
      }
    }
    NcclUniqueId id{};
    if (launch.rank == 0) nccl->check(nccl->get_unique_id(&id), "unique id");
    const std::string shared = group->broadcast(std::string(id.internal, sizeof id.internal));
    if (shared.size() != sizeof id.internal) throw PeerError("rank 0 sent a malformed NCCL id");
    std::memcpy(id.internal, shared.data(), sizeof id.internal);

    PeerWatchdog watchdog(*group, timeout);
    watchdog.arm("NCCL init");
    nccl->check(nccl->group_start(), "group start");
    NcclResult res = 0;
    for (auto& k : ranks) {
      cuda->check(cuda->ctx_set_current(k.context), "set context");
      res = nccl->comm_init_rank(&k.comm, nranks, id, k.global);
      if (res != 0) break;
    }
    const NcclResult end = nccl->group_end();
    nccl->check(res, "comm init");
    nccl->check(end, "comm init");
    watchdog.disarm();
    group->barrier();
    on_start(info);
    Runner runner(o, *cuda, *nccl, ranks, nranks, &watchdog);
    try {
      auto rows = sweep(o, runner, nranks, &*group, &watchdog, nullptr, on_row);
      group->barrier();  // nobody tears NCCL down while a peer still uses it
      return rows;
    } catch (...) {
      session.failed();
      throw;
    }
  } catch (const PeerError& e) {
    throw EnvironmentError(fmt::format("rank {}: {}", launch.rank, e.what()));
  }
}

}  // namespace

double peer_timeout_s() {
  const char* v = std::getenv("GPUORCH_PEER_TIMEOUT");
  if (v == nullptr || *v == '\0') return 300;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (*end != '\0' || !(s > 0) || s > 86400) {
    base::fail_input(
        fmt::format("GPUORCH_PEER_TIMEOUT={}: not a number of seconds in (0, 86400]", v));
  }
  return s;
}

bool reporting_process() {
  const auto launch = detect_launch();
  return !launch || launch->rank == 0;
}

std::vector<Row> run_gpu(const Options& o, const std::function<void(const RunInfo&)>& on_start,
                         const std::function<void(const Row&)>& on_row) {
  const auto launch = detect_launch();
  if (launch && launch->world > 1) return run_multi(o, *launch, on_start, on_row);
  return run_single(o, on_start, on_row);
}

}  // namespace gpuorch::comm

#include "gpuorch/comm/host_backend.hpp"

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "gpuorch/base/error.hpp"
#include "gpuorch/comm/expected.hpp"
#include "gpuorch/comm/host_collective.hpp"
#include "gpuorch/comm/host_elements.hpp"

namespace gpuorch::comm::host {
namespace {

// Tags of the backend's own bookkeeping collectives, apart from the measured ones (0, 1, 2, ...).
constexpr std::uint32_t kOwnTags = 0x80000000u;

// "[/build/.../pair.cc:589] Connection closed by peer ..." -> "Connection closed by peer ...".
std::string gloo_message(const std::string& what) {
  if (!what.empty() && what.front() == '[') {
    const auto end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

long long parse_number(const std::string& text, const char* var) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < 0) {
    base::fail_input(fmt::format("{}: '{}' is not a non-negative number", var, text));
  }
  return v;
}

class Rank {
 public:
  Rank(const Options& o, const Faults& f, std::shared_ptr<gloo::Context> ctx, std::size_t max_count)
      : o_(o), f_(f), ctx_(ctx), runner_(o, ctx, max_count), rank_(ctx->rank), n_(ctx->size) {}

  std::vector<std::string> describe(const std::string& address) {
    std::array<char, 256> mine{};
    std::array<char, 256> host{};
    ::gethostname(host.data(), host.size() - 1);
    // nccl-tests' device line; no GPU: device -1, bus id "cpu", then Gloo's TCP device.
    const auto line = fmt::format("Pid {:6} on {:>10} device {:2} [cpu] Gloo {}", ::getpid(),
                                  host.data(), -1, address);
    std::strncpy(mine.data(), line.c_str(), mine.size() - 1);
    std::vector<char> all(mine.size() * static_cast<std::size_t>(n_));
    gloo::AllgatherOptions opts(ctx_);
    opts.setInput(mine.data(), mine.size());
    opts.setOutput(all.data(), all.size());
    opts.setTag(own_tag());
    gloo::allgather(opts);
    std::vector<std::string> out;
    for (int r = 0; r < n_; ++r) out.emplace_back(all.data() + r * mine.size());
    return out;
  }

  Row measure(const SizePoint& p) {
    runner_.prepare(p.count);
    Row row;
    row.size = p;
    row.out_of_place = timing(p, false);
    row.in_place = timing(p, true);
    return row;
  }

 private:
  // In-place alltoall and sendrecv are timed but not checked, as nccl-tests.
  Timing timing(const SizePoint& p, bool in_place) {
    const double seconds = time(in_place);
    const bool checked = o_.check > 0 && (!in_place || checks_in_place(o_.collective));
    const long long wrong = checked ? check(p.count, in_place) : -1;
    return make_timing(o_.collective, n_, p.bytes, seconds, wrong);
  }

  void op(bool in_place) {
    ++ops_;
    if (f_.kind != Faults::Kind::none && f_.fault_rank == rank_ && ops_ == f_.fault_op) {
      std::raise(f_.kind == Faults::Kind::kill ? SIGKILL : SIGSTOP);
    }
    runner_.run(in_place);
  }

  double time(bool in_place) {
    for (int i = 0; i < o_.warmup; ++i) op(in_place);
    barrier();
    const auto start = std::chrono::steady_clock::now();
    // -m: Gloo has no groups; the iteration's ops run one after another.
    const long long ops = static_cast<long long>(o_.iters) * o_.agg_iters;
    for (long long i = 0; i < ops; ++i) op(in_place);
    const std::chrono::duration<double> d = std::chrono::steady_clock::now() - start;
    return across_ranks(d.count() / static_cast<double>(ops));
  }

  // -a: 0 rank 0's time, 1 the mean, 2 the least, 3 the most, as nccl-tests.
  double across_ranks(double mine) {
    switch (o_.average) {
      case 0:
        return reduce<Reduction::sum>(rank_ == 0 ? mine : 0.0);
      case 2:
        return reduce<Reduction::min>(mine);
      case 3:
        return reduce<Reduction::max>(mine);
      default:
        return sum(mine) / n_;
    }
  }

  long long check(std::size_t count, bool in_place) {
    const ElementCounts c = element_counts(o_.collective, count, n_);
    long long wrong = 0;
    for (int iter = 0; iter < o_.check && count > 0; ++iter) {
      fill_input(o_, rank_, runner_.input(in_place), c.send);
      if (!in_place) {
        const std::size_t whole = o_.collective == Collective::reduce_scatter ? c.send : c.recv;
        std::memset(runner_.output(false), 0xA5, whole * o_.type.bytes);
      }
      op(in_place);
      if (!has_output(o_, rank_)) continue;
      void* out = runner_.output(in_place);
      if (f_.corrupt_rank == rank_ && f_.corrupt_index < c.recv) {
        plant_wrong(o_.type, out, f_.corrupt_index);
      }
      wrong += count_wrong(o_, n_, rank_, count, out, c.recv);
    }
    return static_cast<long long>(sum(static_cast<double>(wrong)));
  }

  void barrier() {
    gloo::BarrierOptions opts(ctx_);
    opts.setTag(own_tag());
    gloo::barrier(opts);
  }

  // Sum over ranks (exact for the counts and times at hand).
  double sum(double mine) { return reduce<Reduction::sum>(mine); }

  template <Reduction K>
  double reduce(double mine) {
    double v = mine;
    gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(&v, 1);
    opts.setReduceFunction(&reduce3<double, K>);
    opts.setTag(own_tag());
    gloo::allreduce(opts);
    return v;
  }

  std::uint32_t own_tag() { return kOwnTags + own_tags_++; }

  const Options& o_;
  const Faults& f_;
  std::shared_ptr<gloo::Context> ctx_;
  CollectiveRunner runner_;
  const int rank_, n_;
  long long ops_ = 0;
  std::uint32_t own_tags_ = 0;
};

}  // namespace

Faults faults_from_env() {
  Faults f;
  if (const char* c = std::getenv("GPUORCH_BENCH_CORRUPT"); c && *c) {
    const std::string s = c;
    const auto colon = s.find(':');
    if (colon == std::string::npos) {
      base::fail_input(fmt::format("GPUORCH_BENCH_CORRUPT={}: expected rank:index", s));
    }
    f.corrupt_rank = static_cast<int>(parse_number(s.substr(0, colon), "GPUORCH_BENCH_CORRUPT"));
    f.corrupt_index =
        static_cast<std::size_t>(parse_number(s.substr(colon + 1), "GPUORCH_BENCH_CORRUPT"));
  }
  if (const char* c = std::getenv("GPUORCH_BENCH_FAULT"); c && *c) {
    const std::string s = c;
    const auto a = s.find(':');
    const auto b = a == std::string::npos ? a : s.find(':', a + 1);
    const std::string kind = s.substr(0, a);
    if (b == std::string::npos || (kind != "kill" && kind != "stall")) {
      base::fail_input(fmt::format("GPUORCH_BENCH_FAULT={}: expected kill|stall:rank:op", s));
    }
    f.kind = kind == "kill" ? Faults::Kind::kill : Faults::Kind::stall;
    f.fault_rank =
        static_cast<int>(parse_number(s.substr(a + 1, b - a - 1), "GPUORCH_BENCH_FAULT"));
    f.fault_op = parse_number(s.substr(b + 1), "GPUORCH_BENCH_FAULT");
  }
  return f;
}

std::vector<Row> run_host(const Options& o, const Endpoint& e, const Faults& f,
                          const std::function<void(const RunInfo&)>& on_start,
                          const std::function<void(const Row&)>& on_row) {
  std::vector<Row> rows;
  try {
    Mesh mesh = connect_mesh(e);
    const auto sweep = size_sweep(o, e.world);
    std::size_t max_count = 0;
    for (const auto& p : sweep) max_count = std::max(max_count, p.count);
    Rank rank(o, f, mesh.context, max_count);
    RunInfo info;
    info.nranks = e.world;
    info.library = fmt::format("Gloo {}.{}.{}, transport tcp", GLOO_VERSION_MAJOR,
                               GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
    info.devices = rank.describe(mesh.address);
    on_start(info);
    for (const auto& p : sweep) {
      rows.push_back(rank.measure(p));
      on_row(rows.back());
    }
  } catch (const gloo::Exception& ex) {
    throw PeerError(gloo_message(ex.what()));
  } catch (const StoreError& ex) {
    throw PeerError(ex.what());
  }
  return rows;
}

}  // namespace gpuorch::comm::host

#include "gpuorch/comm/host_collective.hpp"

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/broadcast.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/transport/unbound_buffer.h>

#include <climits>
#include <cstring>
#include <vector>

#include "gpuorch/base/error.hpp"
#include "gpuorch/comm/expected.hpp"
#include "gpuorch/comm/host_elements.hpp"

namespace gpuorch::comm::host {

class CollectiveRunner::Impl {
 public:
  virtual ~Impl() = default;
  virtual void prepare(std::size_t count) = 0;
  virtual void run(bool in_place) = 0;
  virtual void* input(bool in_place) = 0;
  virtual void* output(bool in_place) = 0;
};

namespace {

// A slot prefix of our own for send/recv (gloo/types.h uses 0x01..0x08 for its collectives).
constexpr std::uint8_t kSendrecvSlotPrefix = 0x40;

template <typename T>
class Typed final : public CollectiveRunner::Impl {
 public:
  Typed(const Options& o, std::shared_ptr<gloo::Context> context, std::size_t max_count)
      : o_(o), ctx_(std::move(context)), rank_(ctx_->rank), n_(ctx_->size) {
    const ElementCounts c = element_counts(o.collective, max_count, n_);
    if (o.collective == Collective::reduce_scatter && c.send > INT_MAX) {
      base::fail_input(fmt::format(
          "reduce_scatter --backend host: at most {} elements in all (Gloo counts them in int)",
          INT_MAX));
    }
    send_.resize(std::max<std::size_t>(c.send, 1));
    // Reduce-scatter runs in place on the whole array: its receive buffer is that work array.
    const bool whole = o.collective == Collective::reduce_scatter;
    recv_.resize(std::max<std::size_t>(whole ? c.send : c.recv, 1));
    switch (reduction_of(o.op)) {
      case Reduction::sum:
        set_reduction<Reduction::sum>();
        break;
      case Reduction::prod:
        set_reduction<Reduction::prod>();
        break;
      case Reduction::max:
        set_reduction<Reduction::max>();
        break;
      case Reduction::min:
        set_reduction<Reduction::min>();
        break;
    }
  }

  void prepare(std::size_t count) override {
    count_ = count;
    reduce_scatter_.reset();
    if (o_.collective == Collective::reduce_scatter && count > 0) {
      // Gloo's halving-doubling reduce-scatter (the only one it has) binds its buffer when built.
      reduce_scatter_ = std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(
          ctx_, std::vector<T*>{recv_.data()}, static_cast<int>(count * n()),
          std::vector<int>(n(), static_cast<int>(count)), &reduction_);
    }
  }

  void run(bool in_place) override {
    if (count_ == 0) return;
    const std::size_t c = count_;
    switch (o_.collective) {
      case Collective::all_reduce: {
        gloo::AllreduceOptions opts(ctx_);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        if (!in_place) opts.setInput(send_.data(), c);
        opts.setOutput(recv_.data(), c);
        opts.setReduceFunction(reduce3_);
        opts.setTag(next_tag());
        gloo::allreduce(opts);
        break;
      }
      case Collective::all_gather: {
        gloo::AllgatherOptions opts(ctx_);
        if (!in_place) opts.setInput(send_.data(), c);
        opts.setOutput(recv_.data(), c * n());
        opts.setTag(next_tag());
        gloo::allgather(opts);
        break;
      }
      case Collective::reduce_scatter:
        if (!in_place)
          std::memcpy(static_cast<void*>(recv_.data()), send_.data(), c * n() * sizeof(T));
        reduce_scatter_->run();
        break;
      case Collective::broadcast: {
        gloo::BroadcastOptions opts(ctx_);
        opts.setRoot(o_.root);
        if (!in_place && rank_ == o_.root) opts.setInput(send_.data(), c);
        opts.setOutput(recv_.data(), c);
        opts.setTag(next_tag());
        gloo::broadcast(opts);
        break;
      }
      case Collective::reduce: {
        gloo::ReduceOptions opts(ctx_);
        opts.setRoot(o_.root);
        if (!in_place) opts.setInput(send_.data(), c);
        opts.setOutput(recv_.data(), c);
        opts.setReduceFunction(reduce3_);
        opts.setTag(next_tag());
        gloo::reduce(opts);
        break;
      }
      case Collective::alltoall: {
        // In place (timed only, as nccl-tests): one buffer for both sides.
        gloo::AlltoallOptions opts(ctx_);
        opts.setInput(in_place ? recv_.data() : send_.data(), c * n());
        opts.setOutput(recv_.data(), c * n());
        opts.setTag(next_tag());
        gloo::alltoall(opts);
        break;
      }
      case Collective::sendrecv:
        sendrecv(c, in_place ? recv_.data() : send_.data());
        break;
    }
    if (o_.op.name == "avg" && has_redop(o_.collective) && has_output(o_, rank_)) {
      divide(o_.type, recv_.data(), c, n_);
    }
  }

  void* input(bool in_place) override {
    if (!in_place) return send_.data();
    if (o_.collective == Collective::all_gather) return recv_.data() + rank_ * count_;
    return recv_.data();
  }
  void* output(bool) override { return recv_.data(); }

 private:
  std::size_t n() const { return static_cast<std::size_t>(n_); }
  std::uint32_t next_tag() { return tag_++; }

  template <Reduction K>
  void set_reduction() {
    reduce3_ = &reduce3<T, K>;
    reduction_ = gloo::ReductionFunction<T>(gloo::CUSTOM, &reduce2<T, K>);
  }

  // Each rank sends to (r+1)%n and receives from (r-1+n)%n, as nccl-tests' sendrecv.
  void sendrecv(std::size_t c, T* from) {
    const std::size_t bytes = c * sizeof(T);
    if (n_ == 1) {
      if (from != recv_.data()) std::memcpy(static_cast<void*>(recv_.data()), from, bytes);
      return;
    }
    const auto slot = gloo::Slot::build(kSendrecvSlotPrefix, next_tag());
    auto out = ctx_->createUnboundBuffer(from, bytes);
    auto in = ctx_->createUnboundBuffer(recv_.data(), bytes);
    in->recv((rank_ - 1 + n_) % n_, slot);
    out->send((rank_ + 1) % n_, slot);
    const auto timeout = ctx_->getTimeout();
    if (!out->waitSend(timeout) || !in->waitRecv(timeout)) {
      throw gloo::IoException("send/recv aborted");
    }
  }

  const Options& o_;
  std::shared_ptr<gloo::Context> ctx_;
  const int rank_, n_;
  std::vector<T> send_, recv_;
  std::size_t count_ = 0;
  std::uint32_t tag_ = 0;
  void (*reduce3_)(void*, const void*, const void*, std::size_t) = nullptr;
  gloo::ReductionFunction<T> reduction_{gloo::CUSTOM, nullptr};
  std::unique_ptr<gloo::ReduceScatterHalvingDoubling<T>> reduce_scatter_;
};

}  // namespace

CollectiveRunner::CollectiveRunner(const Options& o, std::shared_ptr<gloo::Context> context,
                                   std::size_t max_count) {
  visit_type(o.type, [&]<typename T>(T) {
    impl_ = std::make_unique<Typed<T>>(o, std::move(context), max_count);
  });
}
CollectiveRunner::~CollectiveRunner() = default;
void CollectiveRunner::prepare(std::size_t count) { impl_->prepare(count); }
void CollectiveRunner::run(bool in_place) { impl_->run(in_place); }
void* CollectiveRunner::input(bool in_place) { return impl_->input(in_place); }
void* CollectiveRunner::output(bool in_place) { return impl_->output(in_place); }

}  // namespace gpuorch::comm::host

#include "gpuorch/comm/expected.hpp"

namespace gpuorch::comm {

ElementCounts element_counts(Collective c, std::size_t count, int nranks) {
  const auto n = static_cast<std::size_t>(nranks);
  switch (c) {
    case Collective::all_gather:
      return {count, count * n};
    case Collective::reduce_scatter:
      return {count * n, count};
    case Collective::alltoall:
      return {count * n, count * n};
    default:
      return {count, count};
  }
}

double expected_value(const Options& o, int nranks, int rank, std::size_t count, std::size_t i) {
  const std::size_t c = count == 0 ? 1 : count;
  switch (o.collective) {
    case Collective::all_reduce:
    case Collective::reduce:
      return reduced_value(o, nranks, i);
    case Collective::reduce_scatter:
      return reduced_value(o, nranks, static_cast<std::size_t>(rank) * count + i);
    case Collective::all_gather:  // block p comes from rank p
      return input_value(o, static_cast<int>(i / c), i % c);
    case Collective::broadcast:
      return input_value(o, o.root, i);
    case Collective::alltoall:  // block p of rank r = block r of rank p
      return input_value(o, static_cast<int>(i / c),
                         static_cast<std::size_t>(rank) * count + i % c);
    case Collective::sendrecv:
      return input_value(o, (rank - 1 + nranks) % nranks, i);
  }
  return 0;
}

bool has_output(const Options& o, int rank) {
  return o.collective != Collective::reduce || rank == o.root;
}

}  // namespace gpuorch::comm

#include "gpuorch/comm/check_pattern.hpp"

#include <cstdint>
#include <cstring>

namespace gpuorch::comm {
namespace {

template <typename T>
void put(unsigned char* p, double v) {
  const auto x = static_cast<T>(v);
  std::memcpy(p, &x, sizeof x);
}

// ncclDataType_t values (nccl.h): int8 0, uint8 1, int32 2, uint32 3, int64 4, uint64 5,
// float32 7, float64 8.
void store(int nccl_type, unsigned char* p, double v) {
  switch (nccl_type) {
    case 0:
      return put<std::int8_t>(p, v);
    case 1:
      return put<std::uint8_t>(p, v);
    case 2:
      return put<std::int32_t>(p, v);
    case 3:
      return put<std::uint32_t>(p, v);
    case 4:
      return put<std::int64_t>(p, v);
    case 5:
      return put<std::uint64_t>(p, v);
    case 7:
      return put<float>(p, v);
    default:
      return put<double>(p, v);
  }
}

}  // namespace

std::vector<Segment> expected_output(const Options& o, int nranks, int rank, std::size_t count) {
  const auto r = static_cast<std::size_t>(rank);
  std::vector<Segment> out;
  switch (o.collective) {
    case Collective::all_reduce:
      out.push_back({0, count, -1, 0});
      break;
    case Collective::reduce:
      if (rank == o.root) out.push_back({0, count, -1, 0});
      break;
    case Collective::reduce_scatter:
      out.push_back({0, count, -1, r * count});
      break;
    case Collective::all_gather:
      for (int b = 0; b < nranks; ++b) {
        out.push_back({static_cast<std::size_t>(b) * count, count, b, 0});
      }
      break;
    case Collective::broadcast:
      out.push_back({0, count, o.root, 0});
      break;
    case Collective::alltoall:  // block p of rank r = block r of rank p
      for (int p = 0; p < nranks; ++p) {
        out.push_back({static_cast<std::size_t>(p) * count, count, p, r * count});
      }
      break;
    case Collective::sendrecv:
      out.push_back({0, count, (rank - 1 + nranks) % nranks, 0});
      break;
  }
  return out;
}

std::vector<unsigned char> encode_values(const Options& o, int nranks, int source_rank,
                                         std::size_t first, std::size_t n) {
  std::vector<unsigned char> out(n * o.type.bytes);
  for (std::size_t j = 0; j < n; ++j) {
    const double v = source_rank >= 0 ? input_value(o, source_rank, first + j)
                                      : reduced_value(o, nranks, first + j);
    store(o.type.nccl, out.data() + j * o.type.bytes, v);
  }
  return out;
}

}  // namespace gpuorch::comm

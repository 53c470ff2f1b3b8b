#include "gpuorch/sched/tie_break.hpp"

#include <algorithm>
#include <numeric>

namespace gpuorch::sched {

std::uint64_t name_rank_key(std::uint64_t seed, const std::string& name) {
  // FNV-1a over the name, then splitmix64 with the seed: stable across runs, builds and hosts.
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  std::uint64_t z = h ^ (seed * 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27U)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31U);
}

std::vector<std::uint32_t> name_ranking(std::uint64_t seed,
                                        std::span<const cluster::NodeSpec> nodes) {
  std::vector<std::uint64_t> key(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) key[i] = name_rank_key(seed, nodes[i].name);
  std::vector<std::uint32_t> order(nodes.size());
  std::iota(order.begin(), order.end(), 0U);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return key[a] != key[b] ? key[a] < key[b] : nodes[a].name < nodes[b].name;
  });
  std::vector<std::uint32_t> rank(nodes.size());
  for (std::size_t r = 0; r < order.size(); ++r) rank[order[r]] = static_cast<std::uint32_t>(r);
  return rank;
}

}  // namespace gpuorch::sched
